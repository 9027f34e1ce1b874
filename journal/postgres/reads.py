"""Reading the PostgreSQL journal: one timer, a listing, and the summary numbers.

These read the database, never a node's memory: ``lookup`` is what ``await engine.lookup(key)``
answers, and the CLI's ``show``, ``list`` and ``status`` read the same. Each is one statement,
so it sees one consistent snapshot. Synchronous twins (``*_sync``) serve the CLI.
"""

from __future__ import annotations

from typing import Any, Final, NamedTuple

from psycopg import AsyncConnection, Connection

from journal.postgres.rows import COLUMNS, StoredTimer, stored
from journal.postgres.schema import DB_NOW
from journal.state import STATE_CODE, STATES, TimerState

__all__ = [
    "Summary",
    "listing_sync",
    "lookup",
    "lookup_many",
    "lookup_sync",
    "summary",
    "summary_sync",
]

_LOOKUP: Final = f"SELECT {COLUMNS} FROM wheel_timers t WHERE t.key = %s"
_LOOKUP_MANY: Final = f"SELECT {COLUMNS} FROM wheel_timers t WHERE t.key = ANY(%s::text[])"
_LIST: Final = (
    f"SELECT {COLUMNS} FROM wheel_timers t"
    " WHERE (%(state)s::smallint IS NULL OR t.state = %(state)s::smallint)"
    " ORDER BY t.due, t.version LIMIT %(limit)s"
)
_SUMMARY: Final = (
    "SELECT (SELECT coalesce(json_object_agg(state, n), '{}') FROM"
    "   (SELECT state, count(*) AS n FROM wheel_timers GROUP BY state) s),"
    " (SELECT coalesce(json_object_agg(owner, n), '{}') FROM"
    "   (SELECT owner, count(*) AS n FROM wheel_partitions"
    f"    WHERE owner IS NOT NULL AND lease_until > {DB_NOW} GROUP BY owner) o),"
    f" (SELECT count(*) FROM wheel_nodes WHERE alive_until > {DB_NOW}),"
    # A fresh sequence shows last_value 1 before its first nextval: is_called tells them apart.
    " (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM wheel_version_seq),"
    " (SELECT count(*) FROM wheel_partitions)"
)


class Summary(NamedTuple):
    """Counts for ``status``; ``owners``: partitions held under a valid lease, by node."""

    states: dict[TimerState, int]
    owners: dict[str, int]
    live_nodes: int
    last_version: int  #: the highest version issued so far (0 before the first)
    partitions: int


def _summary(row: Any) -> Summary:
    states = {name: 0 for name in STATES}
    for code, count in row[0].items():
        states[STATES[int(code)]] = int(count)
    owners = {str(node): int(count) for node, count in row[1].items()}
    return Summary(states, owners, int(row[2]), int(row[3] or 0), int(row[4]))


async def lookup(conn: AsyncConnection[Any], key: str) -> StoredTimer | None:
    """The stored row of ``key``, or None."""
    row = await (await conn.execute(_LOOKUP, (key,))).fetchone()
    return None if row is None else stored(row)


async def lookup_many(conn: AsyncConnection[Any], keys: list[str]) -> list[StoredTimer]:
    """The stored rows of ``keys`` (those that exist), in no particular order."""
    cur = await conn.execute(_LOOKUP_MANY, (keys,))
    return [stored(row) for row in await cur.fetchall()]


def lookup_sync(conn: Connection[Any], key: str) -> StoredTimer | None:
    """:func:`lookup` on a synchronous connection."""
    row = conn.execute(_LOOKUP, (key,)).fetchone()
    return None if row is None else stored(row)


def listing_sync(
    conn: Connection[Any], *, state: str | None = None, limit: int = 100
) -> list[StoredTimer]:
    """Up to ``limit`` timers (of ``state`` when given) in (due, version) order."""
    code = None if state is None else STATE_CODE[state]
    rows = conn.execute(_LIST, {"state": code, "limit": limit}).fetchall()
    return [stored(row) for row in rows]


async def summary(conn: AsyncConnection[Any]) -> Summary:
    """Counts by state, partitions by owner, live nodes, the last version issued."""
    row = await (await conn.execute(_SUMMARY)).fetchone()
    assert row is not None  # a bare SELECT always returns its one row
    return _summary(row)


def summary_sync(conn: Connection[Any]) -> Summary:
    """:func:`summary` on a synchronous connection."""
    row = conn.execute(_SUMMARY).fetchone()
    assert row is not None  # a bare SELECT always returns its one row
    return _summary(row)
