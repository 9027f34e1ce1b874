"""What a node holds of its partitions' timers: the horizon refill and the change feed.

- :class:`Refiller` reads on through the database every quarter of the horizon (the loaded
  range stays at least three quarters of a horizon ahead of now), and prunes finished rows
  past the retention window, or beyond the journal's newest ``max_retained`` finished rows, in
  the partitions this node holds.
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
from collections.abc import Callable
from typing import Final

from journal.errors import JournalError
from journal.postgres import PostgresStore
from wheel_engine.nodes.adopting import Adopter

__all__ = ["FEED_POLL", "FeedReader", "Refiller"]

logger = logging.getLogger(__name__)

#: Seconds between feed reads when no NOTIFY comes (the LISTEN connection only wakes early).
FEED_POLL: Final = 1.0
#: The refill runs this many times per horizon.
REFILLS_PER_HORIZON: Final = 4


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
            self._adopter.rows(await self._store.refill())
            await self._store.prune(self._retention, max_retained=self._max_retained)
        except JournalError as exc:
            logger.warning("refill of node %s failed: %s", self._store.node, exc)

    async def run(self) -> None:
        """Refills until cancelled."""
        while True:
            await asyncio.sleep(self.every)
            await self.refill()


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
