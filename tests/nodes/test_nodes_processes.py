"""Real ``Engine``s in separate processes (``node_process.py``) on one PostgreSQL journal: three
share 1,500 timers and one is SIGKILLed; a cancel from one process stops a handler running in
another; stale-version cancels across processes; a SIGSTOPped node whose lease lapsed, resumed.

What is checked comes from the database (states, versions, attempts, the first attempt's time
on the database's clock, partition owners) and from the nodes' firing logs (written when each
handler starts, with the epoch its attempt was claimed under). All the processes run on this
machine, so the nodes' wall clock is the database's.
"""

from __future__ import annotations

import signal
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
from node_support import db_now, key_in, sql, state_of
from process_support import (
    NodeProcess,
    firings,
    owners,
    partitions_of,
    rows,
    shared_by,
    start_nodes,
    stop_nodes,
    wait_for,
)

from journal.postgres import partition_of

pytestmark = pytest.mark.slow

LEASE = 2.0
#: Seconds after the lease lapses within which a killed node's timers must have fired.
SLACK = 3.0
TIMERS = 1_500
#: Timers fall due over this many seconds, from a second after they are scheduled.
SPREAD = 6.0
#: Timers cancelled while pending: the last ones to fall due, so their cancels find them so.
CANCELLED = 90
SUCCEEDED, CANCELED = 2, 3
UNFINISHED = "SELECT count(*) FROM wheel_timers WHERE state NOT IN (2, 3)"


def part(key: str) -> int:
    return partition_of(key, 64)


def schedule_spread(
    nodes: list[NodeProcess], count: int, start: float, **extra: Any
) -> dict[str, int]:
    """``count`` timers "t<i>" due over :data:`SPREAD` s from ``start``, each node scheduling
    every n-th one (mostly into partitions it does not own). Returns key -> committed version."""
    committed: dict[str, int] = {}
    for n, node in enumerate(nodes):
        requests = [
            {"handler": "h", "key": f"t{i}", "at": start + SPREAD * i / count, **extra}
            for i in range(n, count, len(nodes))
        ]
        committed |= node.schedule(requests)
    assert len(committed) == count
    return committed


def check_never_early(fired: list[dict[str, Any]], url: str) -> None:
    assert all(f["at"] >= f["due"] for f in fired), "a handler started before its due"
    early = sql(url, "SELECT key FROM wheel_timers WHERE first_attempt_at < due")
    assert early == [], f"claimed before due by the database's clock: {early}"


def test_three_engines_share_1500_timers_and_one_is_sigkilled(pg_url: str, tmp_path: Path) -> None:
    names = ["n0", "n1", "n2"]
    nodes = start_nodes(pg_url, names, LEASE, tmp_path)
    try:
        wait_for("three nodes sharing the partitions", lambda: shared_by(pg_url, names))
        start = db_now(pg_url) + 1.0
        committed = schedule_spread(nodes, TIMERS, start)
        # Cancelled from a node that (mostly) does not own them, while they are pending.
        late = [f"t{i}" for i in range(TIMERS - CANCELLED, TIMERS)]
        results = {key: nodes[i % 3].cancel(key, committed[key]) for i, key in enumerate(late)}
        assert set(results.values()) == {"CANCELED"}, results
        wait_for("the run to be half way", lambda: db_now(pg_url) > start + SPREAD / 2)
        victim = Counter(owners(pg_url).values()).most_common(1)[0][0]
        doomed = partitions_of(pg_url, victim)
        nodes[names.index(victim)].signal(signal.SIGKILL)
        killed_at = db_now(pg_url)
        wait_for("every timer to finish", lambda: sql(pg_url, UNFINISHED) == [(0,)])
        taken = sql(
            pg_url,
            "SELECT owner, acquired_at FROM wheel_partitions WHERE partition = ANY(%s)",
            (sorted(doomed),),
        )  # before the survivors close and release everything
    finally:
        stop_nodes(nodes)
    fired = firings(nodes)
    stored = rows(pg_url)
    # Every committed timer ended as it must, at the version its schedule committed.
    for key, version in committed.items():
        expected = CANCELED if key in results else SUCCEEDED
        assert (stored[key]["version"], stored[key]["state"]) == (version, expected), key
    ran = Counter((f["key"], f["version"]) for f in fired)
    assert {k for k, _ in ran} == set(committed) - set(results), "missed or cancelled fired"
    assert all(committed[k] == v for k, v in ran), "a version that was not committed fired"
    check_never_early(fired, pg_url)
    # The work was shared, and only the killed node's timers ran twice, attempts counted.
    assert all(n > 50 for n in Counter(f["node"] for f in fired).values()), Counter(
        f["node"] for f in fired
    )
    again = {k for (k, _), n in ran.items() if n > 1}
    assert all(part(k) in doomed for k in again), again
    assert all(stored[k]["attempts"] == ran[k, committed[k]] for k in again)
    # The killed node's partitions went to the survivors, and its timers fired, in time.
    assert {owner for owner, _ in taken} <= set(names) - {victim}
    assert all(at <= killed_at + LEASE + SLACK for _, at in taken), (killed_at, taken)
    for f in fired:
        if part(f["key"]) in doomed and f["due"] > killed_at and f["node"] != victim:
            assert f["at"] <= max(f["due"], killed_at + LEASE) + SLACK, f


def test_a_cancel_from_another_process_stops_the_handler_running_there(
    pg_url: str, tmp_path: Path
) -> None:
    a, b = nodes = start_nodes(pg_url, ["a", "b"], LEASE, tmp_path)
    try:
        wait_for("two nodes sharing the partitions", lambda: shared_by(pg_url, ["a", "b"]))
        key = key_in(sorted(partitions_of(pg_url, "b")), "run")
        version = a.schedule([{"handler": "slow", "key": key, "delay": 0}])[key]
        wait_for("b to start the handler", lambda: bool(firings([b])))
        assert state_of(pg_url, key) == "RUNNING"
        assert a.cancel(key) == "CANCEL_REQUESTED"
        wait_for("the cancel to end it", lambda: state_of(pg_url, key) == "CANCELED", 10)
        wait_for("b's handler to see it", lambda: len(firings([b])) == 2, 10)
    finally:
        stop_nodes(nodes)
    start, stopped = firings(nodes)
    assert (start["key"], start["version"], start["node"]) == (key, version, "b")
    assert stopped["cancelled"] is True and stopped["node"] == "b"
    assert firings([a]) == []


def test_a_stale_version_cancel_from_another_process_changes_nothing(
    pg_url: str, tmp_path: Path
) -> None:
    a, b = nodes = start_nodes(pg_url, ["a", "b"], LEASE, tmp_path)
    try:
        wait_for("two nodes sharing the partitions", lambda: shared_by(pg_url, ["a", "b"]))
        kept = key_in(sorted(partitions_of(pg_url, "b")), "kept")  # fires on b
        gone = key_in(sorted(partitions_of(pg_url, "a")), "gone")  # would fire on a
        at = time.time() + 1.5
        old = {**a.schedule([{"handler": "h", "key": kept, "at": at}])}
        old |= b.schedule([{"handler": "h", "key": gone, "at": at}])
        new = b.schedule([{"handler": "h", "key": kept, "at": at}])  # replaced on the owner
        new |= a.schedule([{"handler": "h", "key": gone, "at": at}])  # replaced elsewhere
        assert new[kept] > old[kept] and new[gone] > old[gone]
        assert a.cancel(kept, old[kept]) == "NOT_FOUND"
        assert b.cancel(gone, old[gone]) == "NOT_FOUND"
        assert b.cancel(gone, new[gone]) == "CANCELED"
        assert a.cancel(gone, new[gone]) == "ALREADY_DONE"
        wait_for("the live version to fire", lambda: state_of(pg_url, kept) == "SUCCEEDED")
        time.sleep(max(0.0, at + 0.5 - time.time()))  # past the cancelled one's due as well
    finally:
        stop_nodes(nodes)
    fired = [(f["key"], f["version"], f["node"]) for f in firings(nodes)]
    assert fired == [(kept, new[kept], "b")]
    assert rows(pg_url)[gone]["state"] == CANCELED


def test_a_paused_node_whose_lease_lapsed_never_fires_a_version_beside_the_taker(
    pg_url: str, tmp_path: Path
) -> None:
    """SIGSTOP, the lease lapses, the other node takes over, SIGCONT. Per version, every
    firing is a separate attempt under a higher epoch than the one before (at least once,
    never twice under one claim), and each (partition, epoch) was fired by one node only."""
    a, _ = nodes = start_nodes(pg_url, ["a", "b"], LEASE, tmp_path)
    count = 400
    try:
        wait_for("two nodes sharing the partitions", lambda: shared_by(pg_url, ["a", "b"]))
        start = db_now(pg_url) + 1.0
        committed = schedule_spread(nodes, count, start, payload={"hold": 0.05})
        wait_for("the run to be under way", lambda: db_now(pg_url) > start + SPREAD / 3)
        paused = partitions_of(pg_url, "a")
        a.signal(signal.SIGSTOP)
        stopped_at = db_now(pg_url)
        wait_for("b to take over", lambda: len(partitions_of(pg_url, "b")) == 64, LEASE + SLACK)
        time.sleep(0.5)  # b fires some of a's timers while a is still paused
        a.signal(signal.SIGCONT)
        wait_for("every timer to succeed", lambda: sql(pg_url, UNFINISHED) == [(0,)])
    finally:
        stop_nodes(nodes)
    fired = firings(nodes)
    stored = rows(pg_url)
    assert all(f["epoch"] is not None for f in fired), "the worker could not read its epochs"
    assert {(f["key"], f["version"]) for f in fired} == set(committed.items())
    check_never_early(fired, pg_url)
    fencing: defaultdict[tuple[int, int], set[str]] = defaultdict(set)
    runs: defaultdict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for f in fired:
        fencing[part(f["key"]), f["epoch"]].add(f["node"])
        runs[f["key"], f["version"]].append(f)
    assert all(len(who) == 1 for who in fencing.values()), "two nodes fired under one epoch"
    for (key, _), attempts in runs.items():
        attempts.sort(key=lambda f: f["attempt"])
        numbers = [f["attempt"] for f in attempts]
        epochs = [f["epoch"] for f in attempts]
        assert numbers == sorted(set(numbers)), f"one attempt fired twice: {attempts}"
        assert epochs == sorted(set(epochs)), f"a re-run not under a higher epoch: {attempts}"
        assert numbers[-1] <= stored[key]["attempts"]
    taken = [f for f in fired if part(f["key"]) in paused and f["node"] == "b"]
    assert any(f["due"] > stopped_at for f in taken), "b never fired a's timers"
