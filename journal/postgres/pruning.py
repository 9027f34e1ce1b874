"""Pruning: finished rows (SUCCEEDED, CANCELED) go once the retention window has passed.

Only the owner of a partition prunes it, under its current epoch, so nodes never contend for
the same rows; each call deletes at most ``limit`` rows, oldest first (the ``finished_at``
partial index), so a backlog is worked off in bounded steps. DEAD rows stay until redriven or
replaced, as with the SQLite journal. Guaranteed: a row is deleted only while still finished
and older than the window by the database's clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from psycopg import AsyncConnection

from journal.postgres.schema import DB_NOW

__all__ = ["DEFAULT_LIMIT", "prune"]

#: Rows deleted per call at most: a short transaction even with a large backlog.
DEFAULT_LIMIT: Final = 5_000

_PRUNE: Final = (
    "DELETE FROM wheel_timers t USING ("
    "  SELECT f.key FROM wheel_timers f"
    "  JOIN unnest(%(parts)s::int[], %(epochs)s::bigint[]) AS o(partition, epoch)"
    "   ON o.partition = f.partition"
    "  JOIN wheel_partitions p ON p.partition = o.partition AND p.epoch = o.epoch"
    f"   AND p.owner = %(node)s AND p.lease_until > {DB_NOW}"
    f"  WHERE f.state IN (2, 3) AND f.finished_at < {DB_NOW} - %(retention)s"
    "  ORDER BY f.finished_at LIMIT %(limit)s FOR UPDATE OF f SKIP LOCKED) d"
    " WHERE t.key = d.key AND t.state IN (2, 3)"
)


async def prune(
    conn: AsyncConnection[Any],
    node: str,
    held: Sequence[tuple[int, int]],
    *,
    retention: float,
    limit: int = DEFAULT_LIMIT,
) -> int:
    """Delete up to ``limit`` finished rows of the ``(partition, epoch)`` pairs ``held``,
    finished more than ``retention`` seconds ago. Returns how many were deleted."""
    if not retention >= 0:
        raise ValueError(f"retention must be >= 0, not {retention!r}")
    if not held:
        return 0
    params = {
        "node": node,
        "parts": [p for p, _ in held],
        "epochs": [e for _, e in held],
        "retention": float(retention),
        "limit": limit,
    }
    cur = await conn.execute(_PRUNE, params)
    return max(0, int(cur.rowcount))
