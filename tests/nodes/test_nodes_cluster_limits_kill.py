"""``limit_scope="cluster"`` across real node processes (``node_process.py``): a node SIGKILLed
while it holds slots of a cluster-wide ``concurrency`` gives them back within a lease, and the
timers waiting meanwhile are never charged.

What is checked comes from the database: the handler's rows RUNNING under a live lease (what
the claim statement counts as running) and the attempts of the rows still waiting.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
from node_support import db_now, sql
from process_support import shared_by, start_nodes, stop_nodes

pytestmark = pytest.mark.slow

LEASE = 2.0
#: Seconds past a lease within which the killed node's slots must be taken again elsewhere.
SLACK = 1.5
CONCURRENCY = 2
NAMES = ["a", "b", "c"]


def running_live(url: str) -> list[tuple[str, str]]:
    """``(key, owner)`` of the "capped" rows RUNNING under a live lease's epoch."""
    return [
        (str(key), str(owner))
        for key, owner in sql(
            url,
            "SELECT t.key, p.owner FROM wheel_timers t JOIN wheel_partitions p"
            " ON p.partition = t.partition AND p.epoch = t.run_epoch"
            " WHERE t.handler = 'capped' AND t.state = 1"
            " AND p.lease_until > extract(epoch FROM now())",
        )
    ]


def charged_waiting(url: str, started: set[str]) -> int:
    """ "capped" rows PENDING with an attempt, among those that never started."""
    rows = sql(
        url, "SELECT key FROM wheel_timers WHERE handler = 'capped' AND state = 0 AND attempts > 0"
    )
    return len({key for (key,) in rows} - started)


def watch(url: str, seconds: float, peaks: list[int]) -> None:
    """Sample the live running count for ``seconds``, into ``peaks``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        peaks.append(len(running_live(url)))
        time.sleep(0.05)


def test_a_node_killed_holding_slots_gives_them_back_within_a_lease(
    pg_url: str, tmp_path: Path
) -> None:
    limits = {"concurrency": CONCURRENCY, "limit_scope": "cluster"}
    nodes = start_nodes(pg_url, NAMES, LEASE, tmp_path, limits)
    try:
        deadline = time.monotonic() + 30
        while not shared_by(pg_url, NAMES):
            assert time.monotonic() < deadline, "the partitions were not shared"
            time.sleep(0.1)
        now = db_now(pg_url)
        requests = [
            {"handler": "capped", "at": now + 0.5, "key": f"c{i}", "payload": {"hold": 60}}
            for i in range(12)
        ]
        nodes[0].schedule(requests)
        peaks: list[int] = []
        deadline = time.monotonic() + 15
        while len(running_live(pg_url)) < CONCURRENCY:
            assert time.monotonic() < deadline, "the slots were never taken"
            time.sleep(0.05)
        watch(pg_url, 1.5, peaks)  # the others wait: the cap holds across the nodes
        held = running_live(pg_url)
        assert len(held) == CONCURRENCY and max(peaks) == CONCURRENCY
        started = {key for key, _ in held}
        assert charged_waiting(pg_url, started) == 0  # the 10 waiting are not charged
        victim = next(node for node in nodes if node.name == held[0][1])
        victim.signal(signal.SIGKILL)
        killed = time.monotonic()
        back = None
        while time.monotonic() < killed + LEASE + SLACK + 5:
            live = running_live(pg_url)
            peaks.append(len(live))
            if len(live) == CONCURRENCY and all(owner != victim.name for _, owner in live):
                back = time.monotonic() - killed
                break
            time.sleep(0.05)
        assert back is not None, "the killed node's slots were never taken again"
        assert back <= LEASE + SLACK  # within a lease (the victim's last renewal may be fresh)
        watch(pg_url, 1.0, peaks)
        assert max(peaks) == CONCURRENCY  # never above the cap, before, during or after
        started |= {key for key, _ in running_live(pg_url)}
        assert charged_waiting(pg_url, started) == 0
    finally:
        stop_nodes(nodes)
