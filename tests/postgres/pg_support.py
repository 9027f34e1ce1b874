"""Helpers shared by the PostgreSQL journal's tests."""

from __future__ import annotations

from typing import Any

from pg_cluster import db_now, sql  # shared with tests/nodes

from journal.postgres import PostgresStore

__all__ = [
    "balance",
    "db_now",
    "expire_leases",
    "open_store",
    "row_of",
    "sql",
]


async def open_store(
    url: str, node: str, *, lease: float = 10.0, partitions: int | None = 8, **kw: Any
) -> PostgresStore:
    """A store for ``node`` that owns nothing yet (no LISTEN unless asked)."""
    kw.setdefault("listen", False)
    return await PostgresStore.open(url, node=node, lease=lease, partitions=partitions, **kw)


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
