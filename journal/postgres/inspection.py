"""What an operator reads from a PostgreSQL journal besides single timers: the CLI's ``status``
and ``list``.

Each function is one statement on a synchronous connection, so each answer is one consistent
snapshot (two answers may come from two snapshots). Times are the database's clock, the one
that decides whether a timer is due and whether a lease holds. Counting by handler reads the
whole timer table (there is no index on handler): fine for an operator's command, not for a
hot path.
"""

from __future__ import annotations

from typing import Any, Final, NamedTuple

from psycopg import Connection

from journal.postgres.rows import COLUMNS, StoredTimer, stored
from journal.postgres.schema import DB_NOW
from journal.postgres.states import PENDING_CODE
from journal.state import STATE_CODE, STATES, TimerState

__all__ = [
    "DueEdges",
    "NodeRow",
    "PartitionRow",
    "count_sync",
    "db_now_sync",
    "due_edges_sync",
    "handler_counts_sync",
    "last_version_sync",
    "listing_sync",
    "nodes_sync",
    "partitions_sync",
    "schema_version_sync",
]

_FILTER: Final = (
    " WHERE (%(state)s::smallint IS NULL OR t.state = %(state)s::smallint)"
    " AND (%(handler)s::text IS NULL OR t.handler = %(handler)s::text)"
)
_LIST: Final = (
    f"SELECT {COLUMNS} FROM wheel_timers t{_FILTER}"
    " ORDER BY t.due, t.version LIMIT %(limit)s::bigint"
)
_COUNT: Final = f"SELECT count(*) FROM wheel_timers t{_FILTER}"
_BY_HANDLER: Final = "SELECT handler, state, count(*) FROM wheel_timers GROUP BY handler, state"
#: The oldest overdue pending timer, how many are overdue, and the next one due, at DB now.
_EDGES: Final = (
    f"WITH n AS (SELECT {DB_NOW} AS now)"
    " SELECT n.now,"
    f"  (SELECT count(*) FROM wheel_timers t WHERE t.state = {PENDING_CODE} AND t.due <= n.now),"
    "  o.key, o.handler, o.due, x.key, x.handler, x.due"
    " FROM n"
    " LEFT JOIN LATERAL (SELECT t.key, t.handler, t.due FROM wheel_timers t"
    f"   WHERE t.state = {PENDING_CODE} AND t.due <= n.now"
    " ORDER BY t.due, t.version LIMIT 1) o ON true"
    " LEFT JOIN LATERAL (SELECT t.key, t.handler, t.due FROM wheel_timers t"
    f"   WHERE t.state = {PENDING_CODE} AND t.due > n.now"
    " ORDER BY t.due, t.version LIMIT 1) x ON true"
)
_PARTITIONS: Final = (
    "SELECT partition, owner, epoch, lease_until, acquired_at FROM wheel_partitions"
    " ORDER BY partition"
)
_NODES: Final = "SELECT node, alive_until FROM wheel_nodes ORDER BY node"
#: A fresh sequence reports last_value 1 before its first nextval: is_called tells them apart.
_LAST_VERSION: Final = (
    "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM wheel_version_seq"
)
_SCHEMA_VERSION: Final = "SELECT value FROM wheel_meta WHERE name = 'schema_version'"


class DueEdges(NamedTuple):
    """``oldest_overdue`` and ``next_due`` are ``(key, handler, due)`` or None."""

    now: float  #: the database's clock when the statement ran
    overdue: int  #: PENDING timers due at or before ``now``
    oldest_overdue: tuple[str, str, float] | None
    next_due: tuple[str, str, float] | None


class PartitionRow(NamedTuple):
    partition: int
    owner: str | None  #: the last node to take it (kept after its lease lapsed)
    epoch: int  #: bumped by every takeover: the fencing token
    lease_until: float  #: DB clock; the owner holds it only while this is in the future
    acquired_at: float | None


class NodeRow(NamedTuple):
    node: str
    alive_until: float  #: DB clock: the node counts as live (for balancing) until then


def _code(state: str | None) -> int | None:
    return None if state is None else STATE_CODE[state]


def listing_sync(
    conn: Connection[Any],
    *,
    state: str | None = None,
    handler: str | None = None,
    limit: int | None = 100,
) -> list[StoredTimer]:
    """Up to ``limit`` (None: all) timers of ``state`` and ``handler`` in (due, version)
    order."""
    params = {"state": _code(state), "handler": handler, "limit": limit}
    return [stored(row) for row in conn.execute(_LIST, params).fetchall()]


def count_sync(
    conn: Connection[Any], *, state: str | None = None, handler: str | None = None
) -> int:
    """How many timers :func:`listing_sync` would list without a limit."""
    row = conn.execute(_COUNT, {"state": _code(state), "handler": handler}).fetchone()
    return 0 if row is None else int(row[0])


def handler_counts_sync(conn: Connection[Any]) -> dict[str, dict[TimerState, int]]:
    """Timers by handler and state; every state present (0 when none), handlers sorted."""
    counts: dict[str, dict[TimerState, int]] = {}
    for handler, code, n in conn.execute(_BY_HANDLER).fetchall():
        by_state = counts.setdefault(handler, {name: 0 for name in STATES})
        by_state[STATES[code]] = int(n)
    return dict(sorted(counts.items()))


def _edge(key: str | None, handler: str, due: float) -> tuple[str, str, float] | None:
    return None if key is None else (key, handler, due)


def due_edges_sync(conn: Connection[Any]) -> DueEdges:
    """Overdue pending timers (count and oldest) and the next one due, by the DB's clock."""
    row = conn.execute(_EDGES).fetchone()
    assert row is not None  # a SELECT from a one-row CTE returns one row
    return DueEdges(float(row[0]), int(row[1]), _edge(*row[2:5]), _edge(*row[5:8]))


def partitions_sync(conn: Connection[Any]) -> list[PartitionRow]:
    """Every partition with its owner, epoch and lease, in partition order."""
    return [PartitionRow(*row) for row in conn.execute(_PARTITIONS).fetchall()]


def nodes_sync(conn: Connection[Any]) -> list[NodeRow]:
    """Every node that ever heartbeat, live or not (compare ``alive_until`` with DB now)."""
    return [NodeRow(*row) for row in conn.execute(_NODES).fetchall()]


def last_version_sync(conn: Connection[Any]) -> int:
    """The highest version issued so far (0 before the first)."""
    row = conn.execute(_LAST_VERSION).fetchone()
    return 0 if row is None else int(row[0])


def schema_version_sync(conn: Connection[Any]) -> int:
    row = conn.execute(_SCHEMA_VERSION).fetchone()
    return 0 if row is None else int(row[0])


def db_now_sync(conn: Connection[Any]) -> float:
    """The database's clock, epoch seconds."""
    row = conn.execute(f"SELECT {DB_NOW}").fetchone()
    assert row is not None
    return float(row[0])
