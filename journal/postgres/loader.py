"""The horizon loader: an owner holds only its partitions' timers due within a horizon.

:class:`Horizon` remembers how far this node has loaded, as a position ``through`` in
``(due, version)`` order: every PENDING timer of the held partitions at or before it has been
handed out. :meth:`Horizon.refill` reads on from there, keyset-paged (never OFFSET), up to the
database's clock plus ``horizon`` seconds and at most ``max_rows`` rows (so memory stays bounded
however many timers fall due at once; the rest come with the next refill).
:meth:`Horizon.catch_up` reads a newly gained partition up to ``through``, so it joins in step.

Rows that change after they were read reach the owner through the change feed; a changed row
belongs in this node's wheel exactly when it is PENDING and :meth:`Horizon.covers` its
``(due, version)``, otherwise a later refill reads it. The engine must read the feed's cursor
*before* the first refill (see :mod:`journal.postgres.feed`) so nothing falls between the two.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from psycopg import AsyncConnection

from journal.postgres.rows import COLUMNS, StoredTimer, stored
from journal.postgres.schema import DB_NOW
from journal.postgres.states import PENDING_CODE

__all__ = ["DEFAULT_HORIZON", "PAGE", "Horizon"]

#: Seconds ahead an owner loads unless told otherwise: a few minutes of due timers.
DEFAULT_HORIZON: Final = 300.0
#: Rows per page: one round trip carries this many timers.
PAGE: Final = 1_000
#: A version above every real one, to stand for "all of this due time".
_ALL_VERSIONS: Final = 2**63 - 1
_START: Final = (float("-inf"), 0)

_NOW: Final = f"SELECT {DB_NOW}"
_PAGE_SQL: Final = (
    f"SELECT {COLUMNS} FROM wheel_timers t"
    f" WHERE t.partition = ANY(%(parts)s::int[]) AND t.state = {PENDING_CODE}"
    " AND (t.due, t.version) > (%(due)s::float8, %(version)s::bigint)"
    " AND (t.due, t.version) <= (%(until_due)s::float8, %(until_version)s::bigint)"
    " ORDER BY t.due, t.version LIMIT %(limit)s"
)


class Horizon:
    """How far this node has loaded its partitions' pending timers (see the module doc)."""

    __slots__ = ("horizon", "max_rows", "through")

    def __init__(self, horizon: float = DEFAULT_HORIZON, max_rows: int = 100_000) -> None:
        if not horizon > 0:
            raise ValueError(f"horizon must be a positive number of seconds, not {horizon!r}")
        self.horizon = float(horizon)
        self.max_rows = max_rows
        #: Every pending timer at or before this ``(due, version)`` has been loaded.
        self.through: tuple[float, int] = _START

    def covers(self, due: float, version: int) -> bool:
        """True when a PENDING ``(due, version)`` lies in the loaded range (feed rows)."""
        return (due, version) <= self.through

    def reset(self) -> None:
        """Forget what was loaded (after losing every partition)."""
        self.through = _START

    async def refill(
        self, conn: AsyncConnection[Any], partitions: Sequence[int]
    ) -> list[StoredTimer]:
        """Load on from :attr:`through` to the database's clock + :attr:`horizon`."""
        if not partitions:
            return []
        row = await (await conn.execute(_NOW)).fetchone()
        assert row is not None  # a bare SELECT always returns its one row
        until = (float(row[0]) + self.horizon, _ALL_VERSIONS)
        rows, self.through = await _pages(conn, partitions, self.through, until, self.max_rows)
        return rows

    async def catch_up(
        self, conn: AsyncConnection[Any], partitions: Sequence[int]
    ) -> list[StoredTimer]:
        """Load newly gained ``partitions`` from the start up to :attr:`through`.

        When ``max_rows`` cut this short, :attr:`through` moves back to where it stopped, so
        the next refill reads on from there for every partition (rows already held by this
        node may be handed out again; the engine keeps one entry per version).
        """
        if not partitions or self.through == _START:
            return []
        rows, reached = await _pages(conn, partitions, _START, self.through, self.max_rows)
        self.through = min(self.through, reached)
        return rows


async def _pages(
    conn: AsyncConnection[Any],
    partitions: Sequence[int],
    after: tuple[float, int],
    until: tuple[float, int],
    budget: int,
) -> tuple[list[StoredTimer], tuple[float, int]]:
    """Rows in ``(after, until]``, keyset-paged; and the position reached."""
    loaded: list[StoredTimer] = []
    params: dict[str, Any] = {
        "parts": list(partitions),
        "until_due": until[0],
        "until_version": until[1],
    }
    while True:
        limit = min(PAGE, budget - len(loaded))
        if limit <= 0:
            return loaded, after
        params.update(due=after[0], version=after[1], limit=limit)
        page = [stored(r) for r in await (await conn.execute(_PAGE_SQL, params)).fetchall()]
        loaded += page
        if len(page) < limit:
            return loaded, until
        after = (page[-1].due, page[-1].version)
