"""Two engines in one process on one database: shared work, cross-node cancel, handover.

Real time and short leases: the leases run on the database's clock, which is the point.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import pytest
from node_support import Slow, balanced, engine, key_in, owned, sql, state_of, two_nodes, until

from wheel_engine import CancelResult, Engine, Firing, TimerState

pytestmark = pytest.mark.slow


def _recorder(e: Engine, fired: list[tuple[str, str, float, float]]) -> None:
    name = e.stats()["node"]

    @e.handler("h")
    def h(firing: Firing) -> None:
        fired.append((name, firing.key, time.time(), firing.due))


def _state_held(e: Engine, key: str) -> TimerState | None:
    held = e.get(key)
    return None if held is None else held.state


async def test_two_nodes_share_the_work_and_fire_every_timer_once(pg_url: str) -> None:
    fired: list[tuple[str, str, float, float]] = []
    a, b = engine(pg_url, "a"), engine(pg_url, "b")
    _recorder(a, fired)
    _recorder(b, fired)
    async with a, b:
        await balanced(a, b)
        assert set(owned(a)).isdisjoint(owned(b))
        now = time.time()
        requests = [{"handler": "h", "at": now + 0.5 + i / 200, "key": f"t{i}"} for i in range(300)]
        await a.schedule_many(requests[:150])
        await b.schedule_many(requests[150:])
        await until(lambda: len(fired) >= 300)
        await asyncio.sleep(0.3)  # nothing more fires
    assert Counter(key for _, key, _, _ in fired) == {f"t{i}": 1 for i in range(300)}
    assert all(at >= due for _, _, at, due in fired)  # never early
    by_node = Counter(node for node, _, _, _ in fired)
    assert by_node["a"] > 50 and by_node["b"] > 50
    assert sql(pg_url, "SELECT count(*) FROM wheel_timers WHERE state = 2") == [(300,)]


async def test_cancel_from_the_node_that_does_not_own_the_partition(pg_url: str) -> None:
    slow = Slow()
    a, b = two_nodes(pg_url, slow)
    async with a, b:
        await balanced(a, b)
        pending, running = key_in(owned(b), "p"), key_in(owned(b), "r")
        await a.schedule("h", delay=30, key=pending)
        await until(lambda: b.get(pending) is not None)  # b learnt of it through the feed
        assert await a.cancel(pending) is CancelResult.CANCELED
        assert state_of(pg_url, pending) == "CANCELED"
        await until(lambda: _state_held(b, pending) is TimerState.CANCELED)

        await a.schedule("h", delay=0, key=running)
        await asyncio.wait_for(slow.started.wait(), 10)
        assert state_of(pg_url, running) == "RUNNING"
        assert await a.cancel(running) is CancelResult.CANCEL_REQUESTED
        await until(lambda: state_of(pg_url, running) == "CANCELED")
        assert slow.stopped == [running]  # b's handler task was cancelled


async def test_a_stale_version_cancel_across_nodes_is_not_found(pg_url: str) -> None:
    a, b = two_nodes(pg_url)
    async with a, b:
        await balanced(a, b)
        key = key_in(owned(b))
        old = await a.schedule("h", delay=30, key=key)
        new = await b.schedule("h", delay=40, key=key)  # replaced on the owner
        assert await a.cancel(key, version=old.version) is CancelResult.NOT_FOUND
        assert sql(pg_url, "SELECT version, state FROM wheel_timers") == [(new.version, 0)]
        assert await a.cancel(key, version=new.version) is CancelResult.CANCELED


async def test_a_node_that_closes_hands_its_partitions_to_the_other(pg_url: str) -> None:
    fired: list[tuple[str, str, float, float]] = []
    a, b = engine(pg_url, "a"), engine(pg_url, "b")
    _recorder(a, fired)
    _recorder(b, fired)
    async with b:
        async with a:
            await balanced(a, b)
            keys = [key_in(owned(a), f"a{n}-") for n in range(5)]
            at = time.time() + 2.0
            for key in keys:
                await a.schedule("h", at=at, key=key)
            closing = time.monotonic()
        await until(lambda: len(owned(b)) == 64, patience=5)
        handover = time.monotonic() - closing
        await until(lambda: len(fired) == 5)
    assert handover < 1.5  # about a second: no lease had to lapse
    assert sorted(key for node, key, _, _ in fired if node == "b") == sorted(keys)
    assert all(at >= due for _, _, at, due in fired)


async def test_lookup_reads_the_database_whichever_node_holds_the_timer(pg_url: str) -> None:
    a, b = two_nodes(pg_url)
    async with a, b:
        await balanced(a, b)
        key = key_in(owned(b))
        info = await b.schedule("h", delay=30, key=key, payload=[1, 2])
        assert a.get(key) is None  # not a's partition: a holds none of it
        assert await a.lookup(key) == info
