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


def _owned(engine: Engine) -> int:
    return len(engine.stats()["partitions"])


async def test_two_nodes_fire_each_occurrence_once(pg_url: str) -> None:
    fired: list[tuple[str, str, float]] = []
    a, b = _node(pg_url, "a", fired), _node(pg_url, "b", fired)
    async with a, b:
        await _until(lambda: _owned(a) == _owned(b) == 32)  # balanced: no partition moves now
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
    assert len({node for node, _, _ in fired}) == 1  # the holder of the name's partition (#25)


async def test_two_nodes_never_run_a_slow_recurrence_twice_at_once(pg_url: str) -> None:
    """``overlap=False`` across nodes (#25): a handler slower than ``every=`` on two nodes, with
    the partitions spread over both. Every occurrence lives in the name's partition, so the one
    node holding it runs each, after its predecessor; placed by their own keys (before #25) the
    occurrences would land on both nodes and run side by side."""
    runs: list[tuple[str, float, float, float]] = []  # key, wall start, monotonic start, end
    active = [0, 0]  # running now, most ever at once

    def node(name: str) -> Engine:
        engine = Engine(pg_url, node=name, lease=LEASE, horizon=60.0)

        async def slow(firing: Firing) -> None:
            wall, start = time.time(), time.monotonic()
            active[0] += 1
            active[1] = max(active)
            try:
                await asyncio.sleep(0.35)  # every= is 0.2
            finally:
                active[0] -= 1
            runs.append((firing.key, wall, start, time.monotonic()))

        engine.register("slow", slow)
        return engine

    a, b = node("a"), node("b")
    async with a, b:
        await _until(lambda: _owned(a) == _owned(b) == 32)
        info = await a.schedule_recurring("s", "slow", every=0.2, overlap=False)
        await _until(lambda: len(runs) >= 8)
        assert await b.cancel_recurring("s", version=info.version)
        await _until(lambda: active[0] == 0)  # the ones already started finish
        await asyncio.sleep(0.5)
        await _until(lambda: active[0] == 0)
    assert active[1] == 1, "two occurrences ran at once"
    ordered = sorted(runs, key=lambda run: run[2])
    assert all(later[2] >= earlier[3] for earlier, later in itertools.pairwise(ordered))
    counts = Counter(key for key, *_ in runs)
    assert set(counts.values()) == {1}, counts
    nominals = sorted(occurrence_of(key)[1] for key in counts)  # type: ignore[index]
    assert nominals[0] == info.next_due
    steps = {round(later - earlier, 6) for earlier, later in itertools.pairwise(nominals)}
    assert steps == {0.2}  # every occurrence between the first and the last
    assert all(wall >= occurrence_of(key)[1] for key, wall, _, _ in runs)  # type: ignore[index]


async def test_every_node_lists_the_recurrences_stored_in_the_database(pg_url: str) -> None:
    """``recurrences()`` reads the database's records on PostgreSQL: a recurrence scheduled on
    one node is listed on the other, with the shape schedule_recurring returned (before, each
    node listed only what its own table held: never a record, due in 9999, so nothing)."""
    fired: list[tuple[str, str, float]] = []
    a, b = _node(pg_url, "a", fired), _node(pg_url, "b", fired)
    async with a, b:
        await _until(lambda: _owned(a) == _owned(b) == 32)
        hourly = await a.schedule_recurring("hourly", "sweep", cron="0 * * * *", tz="Europe/Berlin")
        slow = await b.schedule_recurring("slow", "sweep", every=600.0, payload={"n": 1})
        assert await a.recurrences() == await b.recurrences() == [hourly, slow]
        assert await a.cancel_recurring("slow")  # scheduled on b, cancelled from a
        assert await b.recurrences() == await a.recurrences() == [hourly]
    assert fired == []


async def test_a_recurrence_cancelled_from_another_node_fires_no_more(pg_url: str) -> None:
    # "cancel" of #25's list on PostgreSQL: cancelled from the node that does not hold it, no
    # occurrence due after the cancel runs its handler, on either node.
    fired: list[tuple[str, str, float]] = []
    a, b = _node(pg_url, "a", fired), _node(pg_url, "b", fired)
    async with a, b:
        await _until(lambda: _owned(a) == _owned(b) == 32)
        await a.schedule_recurring("s", "sweep", every=0.2)
        await _until(lambda: len(fired) >= 3)
        holder = fired[0][0]
        other = b if holder == "a" else a
        assert await other.cancel_recurring("s")
        cancelled_at = time.time()
        await asyncio.sleep(1.2)  # six periods more
        assert await a.recurrences() == await b.recurrences() == []
    nominals = [occurrence_of(key)[1] for _, key, _ in fired]  # type: ignore[index]
    assert len(nominals) >= 3 and max(nominals) <= cancelled_at  # type: ignore[operator]
