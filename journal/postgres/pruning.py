"""Pruning: finished rows (SUCCEEDED, CANCELED) go once the retention window has passed, and
beyond the newest ``max_retained`` of them, as with the SQLite journal.

Both bounds are over the whole journal, the way ``Engine(retention=, max_retained=)`` states
them: the newest ``max_retained`` finished rows by ``(finished_at, key)`` are kept, wherever
they are, and the rest are due to go, oldest first. Only the owner of a partition prunes it,
under its current epoch, so nodes never contend for the same rows; the bound is reached once
every owner has pruned (each deletes only its own rows below the one shared cut). Each call
deletes at most ``limit`` rows, oldest first (the ``finished_at`` partial index, also the
range the cut bounds), so a backlog is worked off in bounded steps. DEAD rows stay until
redriven or replaced.

Guaranteed: a row is deleted only while still finished, and only if it is older than the
window by the database's clock or not among the newest ``max_retained`` finished rows of the
statement's snapshot. A row finishing concurrently is not in that snapshot; since it can only
push older rows further down, the cut never deletes a row the bound would keep. Not
guaranteed: that the count is at most ``max_retained`` between prunes (rows finish meanwhile)
or while a partition has no owner.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from psycopg import AsyncConnection

from journal.postgres.schema import DB_NOW
from journal.postgres.states import FINISHED_CODES

__all__ = ["DEFAULT_LIMIT", "prune"]

#: Rows deleted per call at most: a short transaction even with a large backlog.
DEFAULT_LIMIT: Final = 5_000

_FINISHED: Final = f"state IN {FINISHED_CODES}"  # the partial index's predicate
_EXPIRED: Final = f"f.finished_at < {DB_NOW} - %(retention)s"
# The newest finished row that ``max_retained`` no longer keeps: NULL when all of them fit.
_CUT: Final = (
    f"SELECT c.finished_at, c.key FROM wheel_timers c WHERE c.{_FINISHED}"
    " AND c.finished_at IS NOT NULL"
    " ORDER BY c.finished_at DESC, c.key DESC OFFSET %(max_retained)s LIMIT 1"
)
_DELETE: Final = (
    "{cut}DELETE FROM wheel_timers t USING ("
    "  SELECT f.key FROM wheel_timers f"
    "  JOIN unnest(%(parts)s::int[], %(epochs)s::bigint[]) AS o(partition, epoch)"
    "   ON o.partition = f.partition"
    "  JOIN wheel_partitions p ON p.partition = o.partition AND p.epoch = o.epoch"
    f"   AND p.owner = %(node)s AND p.lease_until > {DB_NOW}"
    f"  WHERE f.{_FINISHED} AND {{which}}"
    "  ORDER BY f.finished_at, f.key LIMIT %(limit)s FOR UPDATE OF f SKIP LOCKED) d"
    f" WHERE t.key = d.key AND t.{_FINISHED}"
)
_PRUNE_EXPIRED: Final = _DELETE.format(cut="", which=_EXPIRED)
# ``finished_at <= greatest(...)`` repeats what the OR says as a range the index can scan,
# so a call with nothing to delete reads no more than the rows it would delete.
_PRUNE_BOTH: Final = _DELETE.format(
    cut=f"WITH cut AS ({_CUT}) ",
    which=(
        f"f.finished_at <= greatest({DB_NOW} - %(retention)s, (SELECT finished_at FROM cut))"
        f" AND ({_EXPIRED} OR (f.finished_at, f.key) <= (SELECT finished_at, key FROM cut))"
    ),
)


async def prune(
    conn: AsyncConnection[Any],
    node: str,
    held: Sequence[tuple[int, int]],
    *,
    retention: float,
    max_retained: int | None = None,
    limit: int = DEFAULT_LIMIT,
) -> int:
    """Delete up to ``limit`` finished rows of the ``(partition, epoch)`` pairs ``held``:
    those finished more than ``retention`` seconds ago and (unless ``max_retained`` is None)
    those beyond the newest ``max_retained`` finished rows of the journal. Returns how many
    were deleted. Raises ``ValueError`` for a bad bound, before touching anything."""
    if not retention >= 0:
        raise ValueError(f"retention must be >= 0, not {retention!r}")
    if max_retained is not None and (type(max_retained) is not int or max_retained < 0):
        raise ValueError(f"max_retained must be an int >= 0 or None, not {max_retained!r}")
    if not held:
        return 0
    params = {
        "node": node,
        "parts": [p for p, _ in held],
        "epochs": [e for _, e in held],
        "retention": float(retention),
        "max_retained": max_retained,
        "limit": limit,
    }
    statement = _PRUNE_EXPIRED if max_retained is None else _PRUNE_BOTH
    cur = await conn.execute(statement, params)
    return max(0, int(cur.rowcount))
