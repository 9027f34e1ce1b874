"""Scheduling and cancelling in the caller's own transaction (``connection=``), on the real
server: the timer exists, and fires, only if the caller commits.

Real time: what is tested is the server's transactions, NOTIFY at commit and the change feed,
so timers are due at once and the tests wait (bounded) for the firing.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import psycopg
import pytest
from node_support import engine, sql, state_of, until

from wheel_engine import CancelResult, DuplicateKey, Engine, Firing, TimerState

pytestmark = pytest.mark.slow


def _recording(e: Engine) -> list[str]:
    fired: list[str] = []

    @e.handler("h")
    def h(firing: Firing) -> None:
        fired.append(firing.key)

    return fired


async def _connect(url: str, **kw: Any) -> psycopg.AsyncConnection[Any]:
    return await psycopg.AsyncConnection.connect(url, **kw)


def _orders(url: str) -> None:
    sql(url, "CREATE TABLE orders (id text PRIMARY KEY, state text NOT NULL)")


async def test_a_committed_schedule_fires_once(pg_url: str) -> None:
    _orders(pg_url)
    e = engine(pg_url, "a")
    fired = _recording(e)
    async with e, await _connect(pg_url) as conn:
        async with conn.transaction():
            await conn.execute("INSERT INTO orders VALUES ('o1', 'NEW')")
            info = await e.schedule("h", delay=0, key="o1", payload={"n": 1}, connection=conn)
            assert info.committed is False and info.state is TimerState.PENDING
            assert info.payload == {"n": 1}
            assert await e.lookup("o1") is None  # the engine's own connection: not yet
        looked = await e.lookup("o1")
        assert looked is not None and looked.committed and looked.version == info.version
        await until(lambda: fired == ["o1"])
        await asyncio.sleep(0.3)  # and only once
    assert fired == ["o1"]
    assert state_of(pg_url, "o1") == "SUCCEEDED"


async def test_a_rollback_or_an_exception_leaves_nothing(pg_url: str) -> None:
    _orders(pg_url)
    e = engine(pg_url, "a")
    fired = _recording(e)
    events: list[object] = []
    async with e, await _connect(pg_url) as conn:
        e.on_event(events.append)
        await conn.execute("INSERT INTO orders VALUES ('o1', 'NEW')")  # opens the transaction
        await e.schedule("h", delay=0, key="o1", connection=conn)
        await conn.rollback()
        with pytest.raises(RuntimeError):
            async with conn.transaction():
                await e.schedule_many([{"handler": "h", "delay": 0, "key": "o2"}], connection=conn)
                raise RuntimeError("the order failed")
        await asyncio.sleep(1.5)  # more than a feed poll: nothing turns up
        assert await e.lookup("o1") is None and await e.lookup("o2") is None
    assert fired == [] and events == []
    assert sql(pg_url, "SELECT count(*) FROM wheel_timers") == [(0,)]
    assert sql(pg_url, "SELECT count(*) FROM orders") == [(0,)]


async def test_pay_and_cancel_commit_or_roll_back_together(pg_url: str) -> None:
    _orders(pg_url)
    e = engine(pg_url, "a")
    fired = _recording(e)
    async with e, await _connect(pg_url) as conn:
        sql(pg_url, "INSERT INTO orders VALUES ('paid', 'NEW'), ('kept', 'NEW')")
        await e.schedule("h", delay=3, key="paid")
        await e.schedule("h", delay=3, key="kept")
        async with conn.transaction():
            await conn.execute("UPDATE orders SET state = 'PAID' WHERE id = 'paid'")
            assert await e.cancel("paid", connection=conn) is CancelResult.CANCELED
            assert state_of(pg_url, "paid") == "PENDING"  # others see it pending until commit
        assert state_of(pg_url, "paid") == "CANCELED"
        with pytest.raises(RuntimeError):
            async with conn.transaction():
                await conn.execute("UPDATE orders SET state = 'PAID' WHERE id = 'kept'")
                assert await e.cancel("kept", connection=conn) is CancelResult.CANCELED
                raise RuntimeError("payment failed")
        assert state_of(pg_url, "kept") == "PENDING"
        await until(lambda: fired == ["kept"])
        await until(
            lambda: e.get("paid") is not None and e.get("paid").state is TimerState.CANCELED
        )  # type: ignore[union-attr]
    assert sql(pg_url, "SELECT id, state FROM orders ORDER BY id") == [
        ("kept", "NEW"),
        ("paid", "PAID"),
    ]


async def test_a_thousand_in_one_transaction(pg_url: str) -> None:
    e = engine(pg_url, "a")
    fired = _recording(e)
    async with e, await _connect(pg_url) as conn:
        requests = [{"handler": "h", "delay": 0, "key": f"t{i}"} for i in range(1000)]
        async with conn.transaction():
            infos = await e.schedule_many(requests, connection=conn)
            assert len(infos) == 1000 and not any(i.committed for i in infos)
            assert sql(pg_url, "SELECT count(*) FROM wheel_timers") == [(0,)]
        await until(lambda: len(fired) == 1000)
    assert sorted(fired) == sorted(f"t{i}" for i in range(1000))


async def test_a_transaction_held_open_five_seconds_still_fires(pg_url: str) -> None:
    e = engine(pg_url, "a")
    fired = _recording(e)
    async with e, await _connect(pg_url) as conn:
        async with conn.transaction():
            await e.schedule("h", delay=0, key="late", connection=conn)
            await e.schedule("h", delay=0, key="other")  # later feed reads pass the open one
            await until(lambda: fired == ["other"])
            await asyncio.sleep(5)
        committed = time.monotonic()
        await until(lambda: "late" in fired)
        assert time.monotonic() - committed < 2.0  # woken by the commit's NOTIFY, not a poll
    assert sorted(fired) == ["late", "other"]


async def test_two_nodes_and_the_transaction_on_a_third_connection(pg_url: str) -> None:
    a, b = engine(pg_url, "a"), engine(pg_url, "b")
    fired_a, fired_b = _recording(a), _recording(b)
    async with a, b, await _connect(pg_url) as conn:
        await until(lambda: len(a.stats()["partitions"]) == 32 == len(b.stats()["partitions"]))
        keys = [f"k{i}" for i in range(40)]
        async with conn.transaction():
            await a.schedule_many(
                [{"handler": "h", "delay": 0, "key": k} for k in keys], connection=conn
            )
        await until(lambda: len(fired_a) + len(fired_b) == 40)
        await asyncio.sleep(0.3)
    assert sorted(fired_a + fired_b) == sorted(keys)  # each once, by its owner
    assert fired_a and fired_b


async def test_a_duplicate_key_fails_only_its_savepoint(pg_url: str) -> None:
    _orders(pg_url)
    e = engine(pg_url, "a")
    _recording(e)
    async with e, await _connect(pg_url) as conn:
        await e.schedule("h", delay=60, key="d")
        async with conn.transaction():
            await conn.execute("INSERT INTO orders VALUES ('o1', 'NEW')")
            with pytest.raises(DuplicateKey):
                await e.schedule("h", delay=1, key="d", on_conflict="error", connection=conn)
            kept = await e.schedule("h", delay=1, key="d", on_conflict="keep", connection=conn)
            assert kept.due > time.time() + 30
        assert sql(pg_url, "SELECT count(*) FROM orders") == [(1,)]  # the rest committed
