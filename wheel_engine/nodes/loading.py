"""What a node holds of its partitions' timers: the horizon refill and the change feed.

- :class:`Refiller` reads on through the database every quarter of the horizon (the loaded
  range stays at least three quarters of a horizon ahead of now), and prunes finished rows
  past the retention window, or beyond the journal's newest ``max_retained`` finished rows, in
  the partitions this node holds.
- :class:`CappedReader` reads the limited handlers' timers on cursors of their own, a slice at
  a time as their gates' lines drain (the loader's cap per handler: ``Horizon.capped``), so a
  limited handler's backlog of millions due at once is never all in memory, and never stands
  in the way of the other handlers' refill.
- :class:`FeedReader` applies the rows changed in the held partitions by any node (schedules,
  replaces, cancels, cancel requests of running handlers, other nodes' claims), woken early by
  ``LISTEN/NOTIFY`` and polling every :data:`FEED_POLL` seconds without it. A NOTIFY that
  partitions were released elsewhere runs the lease round at once (about a second's handover).

Both log and carry on when the database cannot be reached: the next round catches up (the
feed's cursor only moves on after a read that succeeded).
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable
from typing import Final

from journal.errors import JournalError
from journal.postgres import PostgresStore
from wheel_engine.limits import Limits
from wheel_engine.nodes.adopting import Adopter

__all__ = ["CAPPED_EVERY", "CAPPED_ROWS", "FEED_POLL", "CappedReader", "FeedReader", "Refiller"]

logger = logging.getLogger(__name__)

#: Seconds between feed reads when no NOTIFY comes (the LISTEN connection only wakes early).
FEED_POLL: Final = 1.0
#: The refill runs this many times per horizon.
REFILLS_PER_HORIZON: Final = 4
#: Seconds between reads of the limited handlers' own cursors (well within CAPPED_LOOKAHEAD).
CAPPED_EVERY: Final = 0.5
#: A limited handler's timers held at most (loaded, not started), unless its rate starts more
#: than half of that in one CAPPED_EVERY: then what it starts in four of them.
CAPPED_ROWS: Final = 10_000


class Refiller:
    """The horizon refill and pruning loop (see the module docstring)."""

    def __init__(
        self, store: PostgresStore, adopter: Adopter, retention: float, max_retained: int
    ) -> None:
        self._store = store
        self._adopter = adopter
        self._retention = retention
        self._max_retained = max_retained

    @property
    def every(self) -> float:
        return self._store.horizon.horizon / REFILLS_PER_HORIZON

    async def refill(self) -> None:
        """Read on to the horizon and prune once; logged if the database is unreachable."""
        try:
            await self._adopter.adopt(await self._store.refill())
            await self._store.prune(self._retention, max_retained=self._max_retained)
        except JournalError as exc:
            logger.warning("refill of node %s failed: %s", self._store.node, exc)

    async def run(self) -> None:
        """Refills until cancelled."""
        while True:
            await asyncio.sleep(self.every)
            await self.refill()


class CappedReader:
    """The limited handlers' own cursors (see the module docstring)."""

    def __init__(self, store: PostgresStore, adopter: Adopter, limits: Limits) -> None:
        self._store = store
        self._adopter = adopter
        self._limits = limits
        store.horizon.room = self.room

    def sync(self) -> None:
        """The handlers limited now are the ones capped (a registration may have changed)."""
        horizon = self._store.horizon
        if horizon.capped.keys() != self._limits.gates.keys():
            horizon.cap(set(self._limits.gates))

    def room(self, handler: str) -> int:
        """How many more of ``handler``'s timers to load now: none while its gate holds more
        than half its cap (so reads come in slices, not one per start)."""
        gate = self._limits.gates.get(handler)
        if gate is None:
            return CAPPED_ROWS
        rate = gate.limits.rate
        cap = CAPPED_ROWS if rate is None else max(CAPPED_ROWS, math.ceil(rate * 4 * CAPPED_EVERY))
        free = cap - gate.waiting() - len(gate.woken)
        return free if free * 2 >= cap else 0

    async def read(self) -> None:
        self.sync()
        try:
            self._adopter.rows(await self._store.refill_capped())
        except JournalError as exc:
            logger.warning("capped refill of node %s failed: %s", self._store.node, exc)

    async def run(self) -> None:
        """Reads until cancelled."""
        while True:
            await asyncio.sleep(CAPPED_EVERY)
            await self.read()


class FeedReader:
    """The change-feed loop (see the module docstring). ``released()`` runs a lease round."""

    def __init__(
        self, store: PostgresStore, adopter: Adopter, released: Callable[[], None]
    ) -> None:
        self._store = store
        self._adopter = adopter
        self._released = released

    async def run(self) -> None:
        """Reads until cancelled."""
        store = self._store
        listener = store.listener
        while True:
            await store.wait(FEED_POLL)
            if listener.released:
                listener.released = False
                self._released()
            listener.woken.clear()
            await self.read()

    async def read(self) -> None:
        try:
            self._adopter.rows(await self._store.changes())
        except JournalError as exc:
            logger.warning("change feed of node %s failed: %s", self._store.node, exc)
