"""The node's lease loop: renew and take partitions every third of the lease, hand back the
surplus, and keep the wheel in step with what the node owns.

Each round (:meth:`LeaseKeeper.round`) is one :meth:`~journal.postgres.PostgresStore.maintain`
(heartbeat, renew, take up to the fair share on the database's clock), then:

- partitions **lost** (another node holds them now) leave the wheel at once; handlers running
  there run on, and their outcomes are refused if the new owner has moved on;
- partitions **gained** are read from the database up to the loaded horizon (the taker has
  already turned their timers left RUNNING under an older epoch back to PENDING), with the
  records their timers need (``Adopter.adopt``: recurring's rules, #25);
- partitions held beyond the fair share (a node joined) are **released** once no claim,
  handler or outcome of this node is in flight there (``NodeSink.busy_in``), so the newcomer
  takes them at once;
- after a round or a write that could not reach the database, the first round that does
  reconciles the rows left RUNNING under this node's epochs without a handler here
  (:meth:`~wheel_engine.nodes.rereading.Rereader.reconcile`).

A lease that lapsed in the database (an outage or a pause longer than the lease) is never
renewed: the round reports it lost, takes it again under a new epoch if it is free (the take
returns its RUNNING rows to PENDING), and reads it again, so nothing claimed or written before
the lapse is left behind.

A round runs early when another node released partitions (its NOTIFY, seen by the feed loop).
A round that cannot reach the database is logged and the next one tries again; meanwhile the
store stops firing in partitions whose lease is near its end (``Leases.usable``).
"""

from __future__ import annotations

import asyncio
import logging
import math

from journal.errors import JournalError
from journal.postgres import LeaseChange, PostgresStore
from wheel_engine.nodes.adopting import Adopter
from wheel_engine.nodes.sink import NodeSink

__all__ = ["LeaseKeeper"]

logger = logging.getLogger(__name__)


class LeaseKeeper:
    """The lease loop (see the module docstring), over the node's sink (what is in flight in
    a partition, whether a write failed, the reconcile)."""

    def __init__(self, store: PostgresStore, adopter: Adopter, sink: NodeSink) -> None:
        self._store = store
        self._adopter = adopter
        self._sink = sink
        self._wake = asyncio.Event()

    def wake(self) -> None:
        """Run the next round now (partitions were released elsewhere)."""
        self._wake.set()

    async def run(self) -> None:
        """Rounds until cancelled."""
        while True:
            # asyncio.wait, not wait_for: see journal.postgres.feed.Listener.wait.
            waiter = asyncio.ensure_future(self._wake.wait())
            try:
                await asyncio.wait({waiter}, timeout=self._store.leases.renew_every)
            finally:
                waiter.cancel()
            self._wake.clear()
            await self.round()

    async def round(self) -> LeaseChange | None:
        """One lease round; None if the database could not be reached (logged)."""
        store = self._store
        try:
            change = await store.maintain()
            if change.lost:
                dropped = self._adopter.drop_partitions(change.lost)
                logger.warning(
                    "node %s lost partitions %s (%d pending timers left its wheel)",
                    store.node,
                    change.lost,
                    dropped,
                )
            if not store.leases.owned:
                store.horizon.reset()
            if change.gained:
                await self._load(list(change.gained))
            await self._give_back(change.live_nodes)
            if self._sink.failed:
                self._sink.failed = False
                await self._sink.rereader.reconcile()
        except JournalError as exc:
            self._sink.failed = True  # anything may have been lost meanwhile: reconcile after
            logger.warning("lease round of node %s failed: %s", store.node, exc)
            return None
        return change

    async def _load(self, gained: list[int]) -> None:
        store = self._store
        if math.isinf(store.horizon.through[0]):  # nothing loaded yet: read the whole horizon
            rows = await store.refill()
        else:
            rows = await store.catch_up(gained)
        await self._adopter.adopt(rows)  # with the records they need (recurring's, #25)
        logger.info("node %s took partitions %s (%d timers loaded)", store.node, gained, len(rows))

    async def _give_back(self, live_nodes: int) -> None:
        store = self._store
        idle = [p for p in store.leases.surplus(live_nodes) if not self._sink.busy_in(p)]
        if idle:
            self._adopter.drop_partitions(idle)
            await store.release(idle)
