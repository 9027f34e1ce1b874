"""PostgreSQL restarted under engine processes (issue 21, items 3 and 4), on a cluster of the
module's own (``fault_cluster.py``), stopped with ``pg_ctl stop -m fast`` or ``-m immediate``.

- A restart longer than the lease: the nodes' leases lapse in the database while the nodes
  keep running and firing. Attempts that waited in the pool through the outage run after the
  lapse and claim nothing; the lapsed leases must be taken again (new epoch, reset, reload),
  never silently renewed, so that every committed timer still fires, none early.
- A restart shorter than the lease, while handlers run: their outcomes (acks, and the retries
  of handlers that fail their first attempt) cannot be written during the outage. They must
  be written after it (retried), so that no row is left RUNNING without a handler and every
  timer ends SUCCEEDED, the failing ones after their second attempt.
"""

from __future__ import annotations

import itertools
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fault_cluster import FaultCluster, fault_cluster, fresh_database
from node_support import db_now, sql
from process_support import (
    NodeProcess,
    firings,
    rows,
    shared_by,
    start_nodes,
    stop_nodes,
    wait_for,
)

pytestmark = pytest.mark.slow

SUCCEEDED, RUNNING = 2, 1
UNFINISHED = "SELECT count(*) FROM wheel_timers WHERE state <> 2"
#: Seconds after the server is back by which the overdue timers must have fired: the LISTEN
#: connection's retry (1 s), a lease round taking the lapsed leases again, the loading.
RECOVERY = 2.5
_names = itertools.count(1)


@pytest.fixture(scope="module")
def cluster() -> Iterator[FaultCluster]:
    with fault_cluster() as own:
        yield own


@pytest.fixture
def url(cluster: FaultCluster) -> str:
    return fresh_database(cluster, f"outage_{next(_names)}")


def two_nodes(url: str, lease: float, tmp_path: Path) -> list[NodeProcess]:
    """Nodes a and b, once they share the partitions."""
    nodes = start_nodes(url, ["a", "b"], lease, tmp_path)
    try:
        wait_for("two nodes sharing", lambda: shared_by(url, ["a", "b"]))
    except BaseException:
        stop_nodes(nodes)
        raise
    return nodes


def schedule_on_each(
    nodes: list[NodeProcess], requests_of: Callable[[int], list[dict[str, Any]]]
) -> dict[str, int]:
    """Node ``n`` schedules ``requests_of(n)``; key -> committed version, for all of them."""
    committed: dict[str, int] = {}
    for n, node in enumerate(nodes):
        requests = requests_of(n)
        scheduled = node.schedule(requests)
        assert len(scheduled) == len(requests)
        committed |= scheduled
    return committed


def check_all_fired(committed: dict[str, int], fired: list[dict[str, Any]]) -> None:
    ran = Counter((f["key"], f["version"]) for f in fired)
    missing = [k for k, v in committed.items() if not ran[k, v]]
    assert not missing, f"{len(missing)} committed timers never fired: {missing[:5]}"
    assert all(f["at"] >= f["due"] for f in fired), "a handler started before its due"


def test_a_restart_longer_than_the_lease_loses_no_committed_timer(
    cluster: FaultCluster, url: str, tmp_path: Path
) -> None:
    lease, count, spread = 2.0, 240, 6.0
    nodes = two_nodes(url, lease, tmp_path)
    try:
        start = db_now(url) + 0.5
        committed = schedule_on_each(
            nodes,
            lambda n: [
                {"handler": "h", "key": f"t{i}", "at": start + spread * i / count}
                for i in range(n, count, len(nodes))
            ],
        )
        time.sleep(max(0.0, start + 1.0 - time.time()))
        down = cluster.outage(lease + 1.5, "fast")
        assert down > lease
        wait_for("every timer to succeed", lambda: sql(url, UNFINISHED) == [(0,)], 40)
    finally:
        stop_nodes(nodes)
    fired = firings(nodes)
    check_all_fired(committed, fired)
    early = sql(url, "SELECT key FROM wheel_timers WHERE first_attempt_at < due")
    assert early == [], early
    # Prompt once the server is back: the nodes connect afresh (not after the pool's
    # reconnection backoff, which can wait as long again as the outage lasted).
    late = max(f["at"] - f["due"] for f in fired)
    assert late <= down + RECOVERY, (late, down)


def test_outcomes_lost_in_a_restart_are_written_after_it(
    cluster: FaultCluster, url: str, tmp_path: Path
) -> None:
    lease, hold = 10.0, 1.2
    nodes = two_nodes(url, lease, tmp_path)
    try:
        at = db_now(url) + 0.8
        committed = schedule_on_each(
            nodes,
            lambda n: [
                {"handler": handler, "key": f"{handler}-{n}-{i}", "at": at + i * 0.05}
                | {"payload": {"hold": hold}}
                for handler in ("h", "flaky")
                for i in range(12)
            ],
        )
        running = f"SELECT count(*) FROM wheel_timers WHERE state = {RUNNING}"
        wait_for("the handlers to run", lambda: sql(url, running)[0][0] >= len(committed), 10)
        # Down while they run: they return, and the flaky ones fail, during the outage.
        down = cluster.outage(hold + 1.5, "immediate")
        assert down < lease * 0.8  # their leases hold: nobody takes over, nothing is reset
        wait_for("every timer to succeed", lambda: sql(url, UNFINISHED) == [(0,)], 30)
        stats = [node.ask("stats")["stats"] for node in nodes]
        retried = sum(s.get("outcome_retries", 0) for s in stats)
    finally:
        stop_nodes(nodes)
    stored = rows(url)
    check_all_fired(committed, firings(nodes))
    flaky = [k for k in committed if k.startswith("flaky")]
    assert all(stored[k]["attempts"] == 2 for k in flaky), {k: stored[k] for k in flaky[:3]}
    ran = Counter(f["key"] for f in firings(nodes))
    twice = [f for f in firings(nodes) if ran[f["key"]] > 1 and f["key"] not in flaky]
    assert not twice, f"an ack was lost, ran again: {twice[:4]} {stats}"
    assert retried > 0, "no outcome write had to be retried: the outage missed the handlers"
