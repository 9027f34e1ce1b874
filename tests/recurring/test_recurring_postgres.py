"""Recurring timers on PostgreSQL: two nodes on one database fire each occurrence once.

Real time and short leases (the leases run on the database's clock, which is the point), so
these are ``slow``; what they assert is deterministic: keys fired, counts, never early.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import Counter

import pytest
from pg_cluster import REQUIRED, psycopg

from wheel_engine import Engine, Firing
from wheel_engine.recurring.rule import occurrence_of

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(psycopg is None and not REQUIRED, reason="psycopg is not installed"),
]

LEASE = 1.5


def _node(url: str, name: str, fired: list[tuple[str, str, float]]) -> Engine:
    engine = Engine(url, node=name, lease=LEASE, horizon=60.0)

    async def sweep(firing: Firing) -> None:
        fired.append((name, firing.key, time.time()))

    engine.register("sweep", sweep)
    return engine


async def _until(condition: object, patience: float = 20.0) -> None:
    deadline = time.monotonic() + patience
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {patience} s")
        await asyncio.sleep(0.02)


async def test_two_nodes_fire_each_occurrence_once(pg_url: str) -> None:
    fired: list[tuple[str, str, float]] = []
    a, b = _node(pg_url, "a", fired), _node(pg_url, "b", fired)
    async with a, b:
        info = await a.schedule_recurring("s", "sweep", every=0.25)
        await _until(lambda: len(fired) >= 16)
        assert await b.cancel_recurring("s", version=info.version)  # from the other node
        await asyncio.sleep(0.6)
    counts = Counter(key for _, key, _ in fired)
    assert set(counts.values()) == {1}, counts  # none twice
    nominals = sorted(occurrence_of(key)[1] for key in counts)  # type: ignore[index]
    steps = {round(later - earlier, 6) for earlier, later in itertools.pairwise(nominals)}
    assert steps == {0.25}  # none missing between the first and the last
    assert nominals[0] == info.next_due
    assert all(at >= occurrence_of(key)[1] for _, key, at in fired)  # type: ignore[index]
    assert {node for node, _, _ in fired} == {"a", "b"}  # occurrences spread over partitions
