"""Fencing after the claim statement (issue 21, items 1 and 2), with real engine processes on
the session's PostgreSQL.

- A node SIGSTOPped while its claim is in flight (pinned there by a ``LOCK TABLE`` the test
  holds for a moment) gets the claim's reply only after its lease lapsed and the other node
  took the partitions over and ran those versions: it must not start them.
- A handler whose claim was kept, but whose worker task only gets its first step after the
  lease is no longer usable (a plain handler of the same group blocked the loop past it, as a
  pause there would), must not start either: the other node took it over and ran it.
- A node that gives partitions back to a newcomer must not give back one where a claim of its
  own is in flight (committed, its reply held back by a proxy between node and database): the
  newcomer would reset the row and run it while the reply is on its way back to the giver.

Each version must have run once, on one node.
"""

from __future__ import annotations

import signal
import time
from collections import Counter
from pathlib import Path

import psycopg
import pytest
from node_support import db_now, key_in, sql
from pg_cluster import Cluster
from process_support import (
    PARTITIONS,
    NodeProcess,
    firings,
    partitions_of,
    shared_by,
    start_nodes,
    stop_nodes,
    wait_for,
)
from slow_replies import slow_replies

pytestmark = pytest.mark.slow

LEASE = 2.0
SLACK = 3.0
SUCCEEDED = 2
#: What identifies the claim statement on the wire, and how long its reply is held back.
CLAIM_STATEMENT = b"claimed AS (UPDATE wheel_timers"
CLAIM_REPLY_DELAY = 4.0
WAITING = (
    "SELECT count(*) FROM pg_stat_activity"
    " WHERE datname = current_database() AND wait_event_type = 'Lock'"
)


def waiting_locks(url: str) -> int:
    return int(sql(url, WAITING)[0][0])


def states(url: str, keys: list[str]) -> Counter[int]:
    rows = sql(url, "SELECT state FROM wheel_timers WHERE key = ANY(%s)", (keys,))
    return Counter(state for (state,) in rows)


def sleep_until(wall: float) -> None:
    time.sleep(max(0.0, wall - time.time()))


def test_a_claim_whose_reply_comes_after_a_pause_past_the_lease_is_not_run(
    pg_url: str, tmp_path: Path
) -> None:
    a, b = nodes = start_nodes(pg_url, ["a", "b"], LEASE, tmp_path)
    try:
        wait_for("two nodes sharing the partitions", lambda: shared_by(pg_url, ["a", "b"]))
        keys = [key_in([p], f"z{p}-") for p in sorted(partitions_of(pg_url, "a"))[:20]]
        at = db_now(pg_url) + 1.5
        committed = b.schedule([{"handler": "h", "key": k, "at": at} for k in keys])
        with psycopg.connect(pg_url) as lock:  # a transaction: the lock lasts until rollback
            sleep_until(at - 0.3)
            lock.execute("LOCK TABLE wheel_timers IN EXCLUSIVE MODE")
            wait_for("a's claim to wait for the lock", lambda: waiting_locks(pg_url) > 0, 5)
            a.signal(signal.SIGSTOP)
            lock.rollback()  # a's claim commits now, its reply waits in a's socket
        wait_for("a's claim to commit", lambda: states(pg_url, keys)[1] == len(keys), 5)
        wait_for("b to take over", lambda: len(partitions_of(pg_url, "b")) == PARTITIONS, 10)
        wait_for("b to run them", lambda: states(pg_url, keys)[SUCCEEDED] == len(keys), 10)
        resumed_at = time.time()
        a.signal(signal.SIGCONT)
        time.sleep(1.5)  # a handles the reply it got while paused, and its lease round
        dropped = a.ask("stats")["stats"].get("dropped", {})
    finally:
        stop_nodes(nodes)
    fired = [f for f in firings(nodes) if f["key"] in committed]
    zombie = [f for f in fired if f["node"] == "a"]
    assert zombie == [], f"a ran claims it no longer owned after {resumed_at}: {zombie[:3]}"
    assert Counter(f["key"] for f in fired) == Counter(keys), "each version ran once"
    assert all(f["node"] == "b" and f["attempt"] == 2 for f in fired), fired[:3]
    assert dropped.get("claim past its lease, given back") == len(keys), dropped


def test_a_partition_with_a_claim_in_flight_is_not_given_back(
    pg_server: Cluster, pg_url: str, tmp_path: Path
) -> None:
    """b holds everything; a joins while b's claim of a timer in the partition b gives back
    first has committed but its reply is still on the way (held back by a proxy)."""
    with slow_replies(pg_server.port, CLAIM_STATEMENT, CLAIM_REPLY_DELAY) as proxy:
        slow_url = proxy.url(pg_url, pg_server.port)
        (b,) = nodes = start_nodes(slow_url, ["b"], LEASE, tmp_path)
        try:
            held = lambda: len(partitions_of(pg_url, "b")) == PARTITIONS  # noqa: E731
            wait_for("b to hold everything", held)
            key = key_in([PARTITIONS - 1], "edge")  # given back first: the highest numbers go
            at = db_now(pg_url) + 1.0
            version = b.schedule([{"handler": "h", "key": key, "at": at}])[key]
            wait_for("b's claim to commit", lambda: states(pg_url, [key])[1] == 1, 5)
            replied = time.monotonic() + CLAIM_REPLY_DELAY
            a = NodeProcess(pg_url, "a", LEASE, tmp_path / "a.log")
            nodes.append(a)
            a.ready()
            wait_for("a fair share", lambda: shared_by(pg_url, ["a", "b"]), 15)
            wait_for("the timer to succeed", lambda: states(pg_url, [key])[SUCCEEDED] == 1, 10)
            time.sleep(max(0.5, replied + 0.5 - time.monotonic()))  # b has had the reply
            assert proxy.delayed >= 1
        finally:
            stop_nodes(nodes)
    fired = [(f["key"], f["version"], f["node"], f["attempt"]) for f in firings(nodes)]
    assert fired == [(key, version, "b", 1)], fired


def test_a_claimed_handler_does_not_start_once_its_lease_lapsed_while_it_waited_for_a_worker(
    pg_url: str, tmp_path: Path
) -> None:
    """One claim, one group: a plain handler that blocks a's loop for longer than the lease,
    and an async one, whose worker task can only start after that. b takes the partition over
    meanwhile and runs both again; a must not start the async one when its loop comes back."""
    a, b = nodes = start_nodes(pg_url, ["a", "b"], LEASE, tmp_path)
    try:
        wait_for("two nodes sharing the partitions", lambda: shared_by(pg_url, ["a", "b"]))
        (partition,) = sorted(partitions_of(pg_url, "a"))[:1]
        blocker, waiter = key_in([partition], "block-"), key_in([partition], "wait-")
        at = db_now(pg_url) + 1.5
        b.schedule(
            [
                {"handler": "block", "key": blocker, "at": at, "payload": {"hold": LEASE + 2.5}},
                {"handler": "h", "key": waiter, "at": at},
            ]
        )
        wait_for("b to run the waiting one", lambda: states(pg_url, [waiter])[SUCCEEDED] == 1, 15)
        time.sleep(LEASE + 3.5)  # a's loop is back and has handled what waited in it
        dropped = a.ask("stats")["stats"].get("dropped", {})
    finally:
        stop_nodes(nodes)
    ran = [(f["node"], f["attempt"]) for f in firings(nodes) if f["key"] == waiter]
    assert ran == [("b", 2)], f"the waiting handler ran on a lapsed lease: {ran}"
    assert dropped.get("claim past its lease, given back", 0) >= 1, dropped
