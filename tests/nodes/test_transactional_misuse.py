"""``connection=`` misused, and the settings it meets: other engines, other databases, failed
or autocommit connections, isolation levels, a journal in a schema of its own, SQLAlchemy."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from node_support import engine, sql, until
from pg_cluster import Cluster

from wheel_engine import Engine, Firing, UnusableConnection

pytestmark = pytest.mark.slow


async def _connect(url: str, **kw: Any) -> psycopg.AsyncConnection[Any]:
    return await psycopg.AsyncConnection.connect(url, **kw)


def _timers(url: str) -> int:
    return int(sql(url, "SELECT count(*) FROM wheel_timers")[0][0])


@pytest.fixture
def other_db(pg_server: Cluster) -> Iterator[str]:
    name = f"wheel_other_{os.getpid()}"
    sql(pg_server.admin_url, f"CREATE DATABASE {name}")
    try:
        yield pg_server.url(name)
    finally:
        sql(pg_server.admin_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.mark.parametrize("where", ["memory", "sqlite"])
async def test_connection_without_postgres_is_a_value_error(
    where: str, tmp_path: Path, pg_url: str
) -> None:
    e = Engine(None if where == "memory" else tmp_path / "j.db")
    e.register("h", lambda firing: None)
    async with e, await _connect(pg_url) as conn:
        with pytest.raises(ValueError, match="postgresql://"):
            await e.schedule("h", delay=1, connection=conn)
        with pytest.raises(ValueError, match="postgresql://"):
            await e.schedule_many([{"handler": "h", "delay": 1}], connection=conn)
        with pytest.raises(ValueError, match="postgresql://"):
            await e.cancel("k", connection=conn)
        assert e.timers() == []
        assert conn.info.transaction_status is psycopg.pq.TransactionStatus.IDLE


async def test_a_connection_to_another_database_writes_nothing(pg_url: str, other_db: str) -> None:
    # The other database has a journal of its own, with the same name of tables and schema.
    sql(other_db, "CREATE TABLE wheel_timers (key text)")
    e = engine(pg_url, "a")
    e.register("h", lambda firing: None)
    async with e, await _connect(other_db) as conn:
        with pytest.raises(UnusableConnection, match="another database"):
            await e.schedule("h", delay=1, key="x", connection=conn)
        await conn.commit()
        with pytest.raises(UnusableConnection, match="another database"):
            await e.cancel("x", connection=conn)
        await conn.commit()
    assert _timers(pg_url) == 0
    assert sql(other_db, "SELECT count(*) FROM wheel_timers") == [(0,)]


async def test_failed_autocommit_and_foreign_connections_are_refused(pg_url: str) -> None:
    e = engine(pg_url, "a")
    e.register("h", lambda firing: None)
    async with e, await _connect(pg_url) as conn, await _connect(pg_url, autocommit=True) as auto:
        with pytest.raises(psycopg.errors.DivisionByZero):
            await conn.execute("SELECT 1 / 0")
        with pytest.raises(UnusableConnection, match="failed"):
            await e.schedule("h", delay=1, connection=conn)
        await conn.rollback()
        with pytest.raises(UnusableConnection, match="autocommit"):
            await e.schedule("h", delay=1, connection=auto)
        async with auto.transaction():  # autocommit with a transaction block open: fine
            await e.schedule("h", delay=60, key="in-block", connection=auto)
        with psycopg.connect(pg_url) as sync_conn, pytest.raises(TypeError, match="AsyncConn"):
            await e.schedule("h", delay=1, connection=sync_conn)
        with pytest.raises(ValueError, match=r"at|delay"):  # the request is checked first
            await e.schedule("h", connection=conn)
        await conn.rollback()
    assert sql(pg_url, "SELECT key FROM wheel_timers") == [("in-block",)]


@pytest.mark.parametrize("level", ["READ COMMITTED", "REPEATABLE READ", "SERIALIZABLE"])
async def test_isolation_levels(level: str, pg_url: str) -> None:
    e = engine(pg_url, "a")
    fired: list[str] = []
    e.register("h", lambda firing: fired.append(firing.key))
    async with e, await _connect(pg_url) as conn:
        await conn.execute(f"SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL {level}")
        await conn.commit()
        async with conn.transaction():
            await e.schedule("h", delay=0, key="k", connection=conn)
        await until(lambda: fired == ["k"])


async def test_serializable_conflicts_are_the_callers_to_retry(pg_url: str) -> None:
    """Two SERIALIZABLE transactions replace one key: one fails with the driver's own
    SerializationFailure (its savepoint and then its whole transaction roll back), and a retry
    of the whole transaction succeeds, as for any statement of the caller's."""
    e = engine(pg_url, "a")
    e.register("h", lambda firing: None)
    async with e, await _connect(pg_url) as one, await _connect(pg_url) as two:
        await e.schedule("h", delay=60, key="k")
        for conn in (one, two):
            await conn.execute(
                "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL SERIALIZABLE"
            )
            await conn.commit()
            await conn.execute("SELECT count(*) FROM wheel_timers")  # both take their snapshot
        first = await e.schedule("h", delay=30, key="k", connection=one)
        await one.commit()
        with pytest.raises(psycopg.errors.SerializationFailure):
            await e.schedule("h", delay=40, key="k", connection=two)
        await two.rollback()
        retried = await e.schedule("h", delay=40, key="k", connection=two)  # the retry
        await two.commit()
    assert retried.version > first.version
    assert sql(pg_url, "SELECT version FROM wheel_timers") == [(retried.version,)]


async def test_a_journal_in_a_schema_of_its_own(pg_url: str) -> None:
    sql(pg_url, "CREATE SCHEMA timers")
    sql(pg_url, "CREATE TABLE public.orders (id text PRIMARY KEY)")
    url = f"{pg_url}?options=-csearch_path%3Dtimers"
    e = engine(url, "a")
    fired: list[str] = []
    e.register("h", lambda firing: fired.append(firing.key))
    async with e, await _connect(pg_url) as conn:  # the application's default search_path
        async with conn.transaction():
            await conn.execute("INSERT INTO orders VALUES ('o1')")
            await e.schedule("h", delay=0, key="o1", connection=conn)
            path = await (await conn.execute("SHOW search_path")).fetchone()
            assert path == ('"$user", public',)  # the caller's path, as it was
        await until(lambda: fired == ["o1"])
    assert sql(pg_url, "SELECT to_regclass('public.wheel_timers')") == [(None,)]
    assert sql(pg_url, "SELECT key FROM timers.wheel_timers") == [("o1",)]


async def test_sqlalchemy_async_engine(pg_url: str) -> None:
    sqlalchemy = pytest.importorskip("sqlalchemy")
    from sqlalchemy.ext.asyncio import create_async_engine

    sql(pg_url, "CREATE TABLE orders (id text PRIMARY KEY)")
    db = create_async_engine(pg_url.replace("postgresql://", "postgresql+psycopg://"))
    e = engine(pg_url, "a")
    fired: list[str] = []

    @e.handler("h")
    def h(firing: Firing) -> None:
        fired.append(firing.key)

    try:
        async with e:
            async with db.begin() as conn:
                await conn.execute(sqlalchemy.text("INSERT INTO orders VALUES ('o1')"))
                raw = (await conn.get_raw_connection()).driver_connection
                await e.schedule("h", delay=0, key="o1", connection=raw)
            with pytest.raises(RuntimeError):
                async with db.begin() as conn:
                    await conn.execute(sqlalchemy.text("INSERT INTO orders VALUES ('o2')"))
                    raw = (await conn.get_raw_connection()).driver_connection
                    await e.schedule("h", delay=0, key="o2", connection=raw)
                    raise RuntimeError("rolled back")
            await until(lambda: fired == ["o1"])
    finally:
        await db.dispose()
    assert sql(pg_url, "SELECT key FROM wheel_timers") == [("o1",)]
