"""The migration that moves a recurrence's rows into the partition of its name (issue 25).

Before it, every key was placed by its own CRC-32; now a recurrence's record and occurrences
take their name's partition (:mod:`journal.postgres.partitioning`). PostgreSQL has no CRC-32,
so the step is Python: it reads the rows whose key holds an ``@`` (the only ones that can
move), asks :func:`partition_of` for each, and rewrites those whose stored partition differs.
It runs inside the migration's transaction, under its advisory lock, so it commits with the
new schema version or not at all, and runs once.

Guaranteed, once it has committed:

- every row's ``partition`` is ``partition_of(key)`` (the invariant ``wheel-engine check``
  holds the journal to);
- no node still holds a lease on a partition a row left or entered: those are released
  (``owner`` NULL, lease lapsed), so an attempt fenced by an older owner's epoch is refused from
  that instant, and the next taker reads the partition from the start, the moved rows with it;
- a moved row that was RUNNING has its attempt's epoch set to 0 (that epoch counted in the
  partition it left): its new partition's next taker returns it to PENDING (or CANCELED if a
  cancel was asked), as for any attempt of an older epoch, and the older run's outcome is
  refused. That attempt may so run twice: at least once, as after a takeover.
"""

from __future__ import annotations

from typing import Any, Final

from psycopg import AsyncConnection

from journal.postgres.partitioning import partition_of
from journal.postgres.states import RUNNING_CODE

__all__ = ["move_recurrence_rows"]

#: Rows read per statement: the step's memory stays bounded however large the table.
PAGE: Final = 5_000

# In key order from the primary key, so each page resumes after the last key read.
_CANDIDATES: Final = (
    "SELECT key, partition FROM wheel_timers WHERE key > %s AND strpos(key, '@') > 0"
    " ORDER BY key LIMIT %s"
)
_MOVE: Final = (
    "UPDATE wheel_timers t SET partition = m.partition,"
    f" run_epoch = CASE WHEN t.state = {RUNNING_CODE} THEN 0 ELSE t.run_epoch END"
    " FROM unnest(%(keys)s::text[], %(parts)s::int[]) AS m(key, partition)"
    " WHERE t.key = m.key"
)
_RELEASE: Final = (
    "UPDATE wheel_partitions SET owner = NULL, lease_until = 0"
    " WHERE partition = ANY(%s::int[]) AND owner IS NOT NULL"
)


async def move_recurrence_rows(conn: AsyncConnection[Any], partitions: int) -> None:
    """Move every row whose key's partition changed under the rule of issue 25 (see module)."""
    touched: set[int] = set()
    after = ""  # every key is non-empty, so all sort after it
    while True:
        cur = await conn.execute(_CANDIDATES, (after, PAGE))
        rows = await cur.fetchall()
        if not rows:
            break
        after = rows[-1][0]
        keys, parts = [], []
        for key, stored in rows:
            wanted = partition_of(key, partitions)
            if wanted != stored:
                keys.append(key)
                parts.append(wanted)
                touched.update((stored, wanted))
        if keys:
            await conn.execute(_MOVE, {"keys": keys, "parts": parts})
    if touched:
        await conn.execute(_RELEASE, (sorted(touched),))
