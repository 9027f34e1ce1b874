"""The writer's INSERT statements: a batch of sealed rows as a few multi-row statements.

``executemany`` of a one-row INSERT runs the statement once per row: each row, SQLite resets
and steps it again, and ``sqlite3`` lets go of the GIL and takes it back around the step. One
INSERT of many ``VALUES`` rows inserts them all in a single step. So a batch of ``n`` rows goes
as ``n // 256`` statements of 256 rows, then statements of 16 for what is left, then one row at
a time for the rest (at most 15): three statements, each prepared once and then taken from
``sqlite3``'s statement cache, whatever size the batches are. 256 rows bind 768 parameters,
under the 999 that SQLite allowed before version 3.32.

Worked example: a batch of 1,000 rows is 3 statements of 256 (768 rows), then 14 of 16 (224),
then 8 of one row: three ``executemany`` calls, in the transaction the writer then commits.

What is stored is what one-row inserts store: the same seqs, in the same order, in the one
transaction. A failure at any row fails its whole statement, and the writer rolls back the batch.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

from journal.codec import seal_params

__all__ = ["INSERT_SQL", "STATEMENTS", "insert_sealed", "insert_sql", "statements"]

#: The one-row INSERT, for the tail of a batch.
INSERT_SQL: Final = "INSERT INTO records (seq, kind, body) VALUES (?, ?, ?)"


def insert_sql(rows: int) -> str:
    """The INSERT of ``rows`` rows: ``rows * 3`` parameters, seq, kind, sealed body each."""
    return "INSERT INTO records (seq, kind, body) VALUES " + ", ".join(["(?, ?, ?)"] * rows)


#: ``(rows a statement, its SQL)``, the widest first. The last inserts one row, so any batch
#: fits; each width is a multiple of the next.
STATEMENTS: Final[tuple[tuple[int, str], ...]] = (
    (256, insert_sql(256)),
    (16, insert_sql(16)),
    (1, INSERT_SQL),
)


def statements(count: int) -> Iterator[tuple[int, str, int, int]]:
    """``(per, sql, start, stop)`` for each ``executemany`` a batch of ``count`` rows takes:
    rows ``start`` to ``stop`` of the batch, ``per`` rows a statement of ``sql``."""
    done = 0
    for per, sql in STATEMENTS:
        stop = done + (count - done) // per * per
        if stop > done:
            yield per, sql, done, stop
            done = stop


async def insert_sealed(conn: Any, first: int, kinds: list[int], bodies: list[bytes]) -> None:
    """Insert row ``i`` (``kinds[i]``, ``bodies[i]``) sealed as seq ``first + i``, through the
    aiosqlite connection ``conn``, in its open transaction: the caller commits or rolls back.
    The rows are sealed in the connection's thread, as each statement binds them."""
    for per, sql, start, stop in statements(len(bodies)):
        await conn.executemany(sql, seal_params(first, kinds, bodies, start, stop, per))
