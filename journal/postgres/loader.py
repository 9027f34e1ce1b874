"""The horizon loader: an owner holds only its partitions' timers due within a horizon.

:class:`Horizon` remembers how far this node has loaded, as a position ``through`` in
``(due, version)`` order: every PENDING timer of the held partitions at or before it has been
handed out. :meth:`Horizon.refill` reads on from there, keyset-paged (never OFFSET), up to the
database's clock plus ``horizon`` seconds and at most ``max_rows`` rows (so memory stays bounded
however many timers fall due at once; the rest come with the next refill).
:meth:`Horizon.catch_up` reads a newly gained partition up to ``through``, so it joins in step.

**Capped handlers** (:attr:`Horizon.capped`: the node caps its limited handlers, whose backlog
may be far longer than they can start) are read on a cursor of their own, each at most
``room`` rows at a time (what the node says it can hold more of that handler) and only up to
:data:`CAPPED_LOOKAHEAD` seconds ahead, so a backlog of millions due at once is read a slice
at a time as it drains, while the other handlers' timers are read past it. Their cursors are
moved on by :meth:`Horizon.refill_capped`, which the node calls often.

Rows that change after they were read reach the owner through the change feed; a changed row
belongs in this node's wheel exactly when it is PENDING and :meth:`Horizon.covers` its
``(due, version)`` (its handler's cursor, for a capped one), otherwise a later refill reads
it. The engine must read the feed's cursor *before* the first refill (see
:mod:`journal.postgres.feed`) so nothing falls between the two.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

from psycopg import AsyncConnection

from journal.postgres.rows import COLUMNS, StoredTimer, stored
from journal.postgres.schema import DB_NOW
from journal.postgres.states import PENDING_CODE

__all__ = ["CAPPED_LOOKAHEAD", "DEFAULT_HORIZON", "PAGE", "Horizon"]

#: Seconds ahead an owner loads unless told otherwise: a few minutes of due timers.
DEFAULT_HORIZON: Final = 300.0
#: Rows per page: one round trip carries this many timers.
PAGE: Final = 1_000
#: Seconds ahead a capped handler's rows are read: its cursor moves on with the clock, so the
#: node must call :meth:`Horizon.refill_capped` well within this (it does every half second).
CAPPED_LOOKAHEAD: Final = 5.0
#: A version above every real one, to stand for "all of this due time".
_ALL_VERSIONS: Final = 2**63 - 1
_START: Final = (float("-inf"), 0)

_NOW: Final = f"SELECT {DB_NOW}"
_PAGE: Final = (
    f"SELECT {COLUMNS} FROM wheel_timers t"
    f" WHERE t.partition = ANY(%(parts)s::int[]) AND t.state = {PENDING_CODE}"
    " AND (t.due, t.version) > (%(due)s::float8, %(version)s::bigint)"
    " AND (t.due, t.version) <= (%(until_due)s::float8, %(until_version)s::bigint)"
)
#: Every handler but the capped ones; one capped handler (by its own index).
_PAGE_SQL: Final = (
    f"{_PAGE} AND t.handler <> ALL(%(capped)s::text[]) ORDER BY t.due, t.version LIMIT %(limit)s"
)
_HANDLER_PAGE_SQL: Final = (
    f"{_PAGE} AND t.handler = %(handler)s ORDER BY t.due, t.version LIMIT %(limit)s"
)


class Horizon:
    """How far this node has loaded its partitions' pending timers (see the module doc)."""

    __slots__ = ("capped", "horizon", "max_rows", "room", "spare", "through")

    def __init__(self, horizon: float = DEFAULT_HORIZON, max_rows: int = 100_000) -> None:
        if not horizon > 0:
            raise ValueError(f"horizon must be a positive number of seconds, not {horizon!r}")
        self.horizon = float(horizon)
        self.max_rows = max_rows
        #: Every pending timer at or before this ``(due, version)`` has been loaded (but those
        #: of capped handlers: by handler, in :attr:`capped`).
        self.through: tuple[float, int] = _START
        #: Capped handler -> its own cursor (see the module docstring).
        self.capped: dict[str, tuple[float, int]] = {}
        #: How many more rows of a capped handler the node can hold now (set by the node).
        self.room: Callable[[str], int] = lambda handler: max_rows
        #: Capped handler -> rows the node may still adopt before its next read: its room then.
        #: That read's rows take theirs as they are adopted, the feed's what is left, so the
        #: feed cannot fill the node past the cap either.
        self.spare: dict[str, int] = {}

    def covers(self, due: float, version: int, handler: str | None = None) -> bool:
        """True when a PENDING ``(due, version)`` of ``handler`` lies in the loaded range."""
        through = self.through if handler is None else self.capped.get(handler, self.through)
        return (due, version) <= through

    def adopts(self, due: float, version: int, handler: str) -> bool:
        """:meth:`covers`, for a changed row the feed brings (see the module docstring). A
        capped handler's row within its cursor takes one of its spare rows; with none spare,
        the cursor moves back before it (a later read brings it, and hands out again the rows
        between), and it is not adopted."""
        through = self.capped.get(handler)
        if through is None:
            return (due, version) <= self.through
        if (due, version) > through:
            return False
        spare = self.spare.get(handler, 0)
        if spare > 0:
            self.spare[handler] = spare - 1
            return True
        self.capped[handler] = (due, version - 1)
        return False

    def cap(self, handlers: set[str]) -> None:
        """Read ``handlers`` on cursors of their own from now on (and no others): a handler
        newly capped starts from :attr:`through`; one no longer capped moves it back to its
        own cursor (rows of the others read again are handed out again: see catch_up)."""
        capped = self.capped
        for handler in set(capped) - handlers:
            self.through = min(self.through, capped.pop(handler))
            self.spare.pop(handler, None)
        for handler in handlers - set(capped):
            capped[handler] = self.through

    def reset(self) -> None:
        """Forget what was loaded (after losing every partition)."""
        self.through = _START
        for handler in self.capped:
            self.capped[handler] = _START

    async def refill(
        self, conn: AsyncConnection[Any], partitions: Sequence[int]
    ) -> list[StoredTimer]:
        """Load on from :attr:`through` to the database's clock + :attr:`horizon`."""
        if not partitions:
            return []
        now = await _db_now(conn)
        until = (now + self.horizon, _ALL_VERSIONS)
        skip = list(self.capped)
        rows, self.through = await _pages(
            conn, partitions, (self.through, until), self.max_rows, capped=skip
        )
        return rows + await self._capped(conn, partitions, now)

    async def refill_capped(
        self, conn: AsyncConnection[Any], partitions: Sequence[int]
    ) -> list[StoredTimer]:
        """Read on each capped handler's cursor, as far as its room and the lookahead allow."""
        if not partitions or not self.capped:
            return []
        return await self._capped(conn, partitions, await _db_now(conn))

    async def _capped(
        self, conn: AsyncConnection[Any], partitions: Sequence[int], now: float
    ) -> list[StoredTimer]:
        until = (now + min(self.horizon, CAPPED_LOOKAHEAD), _ALL_VERSIONS)
        rows: list[StoredTimer] = []
        for handler, through in list(self.capped.items()):
            room = min(self.room(handler), self.max_rows)
            # The whole room, not what the page leaves of it: each row of the page takes a
            # spare row itself as the node adopts it (adopts()). Left at 0 by a page that
            # filled the room, the first of them moved the cursor back before itself and none
            # was adopted, read after read: the handler stalled for good.
            self.spare[handler] = max(0, room)
            if room <= 0 or through >= until:
                continue
            page, self.capped[handler] = await _pages(
                conn, partitions, (through, until), room, handler=handler
            )
            rows += page
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
        window = (_START, self.through)
        rows, reached = await _pages(conn, partitions, window, self.max_rows, capped=[*self.capped])
        self.through = min(self.through, reached)
        for handler, through in list(self.capped.items()):
            room = min(self.room(handler), self.max_rows)
            page, reached = await _pages(conn, partitions, (_START, through), room, handler=handler)
            self.capped[handler] = min(through, reached)
            rows += page
        return rows


async def _db_now(conn: AsyncConnection[Any]) -> float:
    row = await (await conn.execute(_NOW)).fetchone()
    assert row is not None  # a bare SELECT always returns its one row
    return float(row[0])


async def _pages(
    conn: AsyncConnection[Any],
    partitions: Sequence[int],
    window: tuple[tuple[float, int], tuple[float, int]],
    budget: int,
    *,
    capped: list[str] | None = None,
    handler: str | None = None,
) -> tuple[list[StoredTimer], tuple[float, int]]:
    """Rows in ``window``, ``(after, until]``, keyset-paged; and the position reached. Those of
    ``handler`` only, or of every handler but the ``capped`` ones."""
    after, until = window
    loaded: list[StoredTimer] = []
    params: dict[str, Any] = {
        "parts": list(partitions),
        "until_due": until[0],
        "until_version": until[1],
        "capped": capped or [],
        "handler": handler,
    }
    statement = _PAGE_SQL if handler is None else _HANDLER_PAGE_SQL
    while True:
        limit = min(PAGE, budget - len(loaded))
        if limit <= 0:
            return loaded, after
        params.update(due=after[0], version=after[1], limit=limit)
        page = [stored(r) for r in await (await conn.execute(statement, params)).fetchall()]
        loaded += page
        if len(page) < limit:
            return loaded, until
        after = (page[-1].due, page[-1].version)
