"""Reading the PostgreSQL journal: one timer, a listing, the recurrences, and the summary
numbers; :class:`Reading` is the store's side of them.

These read the database, never a node's memory: ``lookup`` is what ``await engine.lookup(key)``
answers, ``records`` what ``await engine.recurrences()`` lists, and the CLI's ``show``, ``list``
and ``status`` read the same. Each is one statement, so it sees one consistent snapshot.
Synchronous twins (``*_sync``) serve the CLI.
"""

from __future__ import annotations

import contextlib
from typing import Any, Final, NamedTuple

from psycopg import AsyncConnection, Connection

from journal.postgres.rows import COLUMNS, StoredTimer, stored
from journal.postgres.schema import DB_NOW
from journal.postgres.states import PENDING_CODE
from journal.state import STATE_CODE, STATES, TimerState

__all__ = [
    "Reading",
    "Record",
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
#: The pending rows of a records' handler, each with the due of the first pending row of an
#: ``occurrences`` handler whose key starts with the record's up to its ``@`` (a recurrence's
#: record ``name@rule`` and its occurrences ``name@<time>`` share the partition of ``name``:
#: the partition's pending index is read up to that occurrence, never the whole table; the
#: cost grows with the timers of that partition due before it).
_RECORDS: Final = (
    f"SELECT {COLUMNS}, n.due FROM wheel_timers t"
    " LEFT JOIN LATERAL (SELECT o.due FROM wheel_timers o"
    f"   WHERE o.partition = t.partition AND o.state = {PENDING_CODE}"
    "   AND starts_with(o.key, split_part(t.key, '@', 1) || '@')"
    "   AND starts_with(o.handler, %(occurrences)s::text)"
    "   ORDER BY o.due, o.version LIMIT 1) n ON true"
    f" WHERE t.handler = %(records)s::text AND t.state = {PENDING_CODE}"
    " ORDER BY t.key"
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


class Record(NamedTuple):
    """A pending record row and the due of its first pending occurrence (None: none)."""

    row: StoredTimer
    next_due: float | None


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


async def records(conn: AsyncConnection[Any], handler: str, occurrences: str) -> list[Record]:
    """Every pending row of ``handler`` with its next occurrence: see :data:`_RECORDS`;
    ``occurrences`` is what the occurrences' handler names start with. By key."""
    params = {"records": handler, "occurrences": occurrences}
    cur = await conn.execute(_RECORDS, params)
    return [Record(stored(row[:-1]), row[-1]) for row in await cur.fetchall()]


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


class Reading:
    """The store's reads, each one statement on a connection of its pool."""

    __slots__ = ()

    def _connection(self, doing: str) -> contextlib.AbstractAsyncContextManager[Any]:
        raise NotImplementedError

    async def lookup(self, key: str) -> StoredTimer | None:
        """The database's row for ``key`` (whichever node owns it), or None."""
        async with self._connection("reading a timer") as conn:
            return await lookup(conn, key)

    async def lookup_many(self, keys: list[str]) -> list[StoredTimer]:
        """The database's rows for ``keys`` (those that exist)."""
        async with self._connection("reading timers") as conn:
            return await lookup_many(conn, keys)

    async def records(self, handler: str, occurrences: str) -> list[Record]:
        """The pending rows of ``handler``, whichever node owns them, with their next
        occurrence (see :func:`records`)."""
        async with self._connection("listing records") as conn:
            return await records(conn, handler, occurrences)

    async def summary(self) -> Summary:
        async with self._connection("reading the summary") as conn:
            return await summary(conn)
