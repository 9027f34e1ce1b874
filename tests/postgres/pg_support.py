"""Helpers shared by the PostgreSQL journal's tests."""

from __future__ import annotations

from typing import Any

import psycopg

from journal.postgres import PostgresStore


async def open_store(
    url: str, node: str, *, lease: float = 10.0, partitions: int | None = 8, **kw: Any
) -> PostgresStore:
    """A store for ``node`` that owns nothing yet (no LISTEN unless asked)."""
    kw.setdefault("listen", False)
    return await PostgresStore.open(url, node=node, lease=lease, partitions=partitions, **kw)


def sql(url: str, statement: str, params: Any = None) -> list[tuple[Any, ...]]:
    """Run one statement on a connection of its own; its rows (if it returns any)."""
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(statement, params)
        return cur.fetchall() if cur.description is not None else []


def db_now(url: str) -> float:
    return float(sql(url, "SELECT extract(epoch FROM now())::float8")[0][0])


def expire_leases(url: str, node: str) -> None:
    """Make ``node``'s leases and heartbeat lapse now, as if it had stopped its lease rounds a
    lease ago: the fault happens where it really would, in the database's tables."""
    sql(url, "UPDATE wheel_partitions SET lease_until = 0 WHERE owner = %s", (node,))
    sql(url, "UPDATE wheel_nodes SET alive_until = 0 WHERE node = %s", (node,))


def row_of(url: str, key: str) -> dict[str, Any]:
    rows = sql(
        url,
        "SELECT version, state, attempts, run_epoch, due, cancel_requested, last_error"
        " FROM wheel_timers WHERE key = %s",
        (key,),
    )
    assert rows, key
    names = ("version", "state", "attempts", "run_epoch", "due", "cancel_requested", "error")
    return dict(zip(names, rows[0], strict=True))


async def balance(*stores: PostgresStore) -> None:
    """Lease rounds, releasing surpluses, until every partition is held and shares are fair."""
    for _ in range(4):
        for store in stores:
            change = await store.maintain()
            await store.release(store.leases.surplus(change.live_nodes))
    for store in stores:
        await store.maintain()
