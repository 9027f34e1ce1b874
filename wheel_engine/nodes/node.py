"""One node: the PostgreSQL store and the loops that keep this engine's wheel in step with it.

:class:`Node` is what ``Engine("postgresql://...")`` holds. :meth:`Node.open` connects (and
creates or upgrades the schema), sets the feed's cursor, takes this node's first partitions,
loads their horizon and makes the store the engine's record sink and storage; it then
runs the lease loop, the change feed and the refill as tasks; :meth:`Node.stop` ends them (the
engine closes the store afterwards, through its commit path, which releases the partitions).

The wheel holds only the pending timers of the partitions this node owns that are due within
the horizon (of a limited handler, a slice of its backlog: ``CappedReader``);
``Engine.lookup`` reads the database for the rest.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Final

from journal.postgres import DEFAULT_HORIZON, DEFAULT_LEASE, PostgresStore, default_node
from journal.postgres.store import CONNECT_TIMEOUT
from wheel_engine.clock import Clock
from wheel_engine.commits import Commits
from wheel_engine.events import EventBus
from wheel_engine.limits import Limits
from wheel_engine.nodes.adopting import Adopter, RecordWatcher
from wheel_engine.nodes.joined import JoinedWrites
from wheel_engine.nodes.leasing import LeaseKeeper
from wheel_engine.nodes.limited import ClusterLimiter
from wheel_engine.nodes.loading import CappedReader, FeedReader, Refiller
from wheel_engine.nodes.scheduler import NodeScheduler
from wheel_engine.nodes.sink import NodeSink
from wheel_engine.stats import Counters
from wheel_engine.timers import TimerTable
from wheel_engine.trigger import Trigger
from wheel_engine.validation import RequestChecker
from wheel_engine.workers import WorkerPool

__all__ = ["STOP_WAIT", "Node"]

logger = logging.getLogger(__name__)

#: Seconds ``stop()`` waits for its cancelled loops (each normally ends at once).
STOP_WAIT: Final = 5.0


class Node:
    """This engine's node on a shared PostgreSQL journal (see the module docstring)."""

    def __init__(
        self,
        url: str,
        *,
        name: str | None,
        lease: float | None,
        horizon: float | None,
        retention: float,
        max_retained: int,
        connect_timeout: float | None = None,
    ) -> None:
        self.url = url
        self.connect_timeout = CONNECT_TIMEOUT if connect_timeout is None else connect_timeout
        self.name = default_node() if name is None else name
        self.lease = DEFAULT_LEASE if lease is None else float(lease)
        self.horizon = DEFAULT_HORIZON if horizon is None else float(horizon)
        self.retention = retention
        self.max_retained = max_retained
        self.store: PostgresStore | None = None
        self._sink: NodeSink | None = None
        self._limiter: ClusterLimiter | None = None
        self._tasks: list[asyncio.Task[None]] = []
        #: Writes in callers' transactions (``connection=``), once open (issue 27).
        self.transactions: JoinedWrites | None = None
        #: Keeps the records its timers need (recurring's, #25); set before :meth:`open`.
        self.records: RecordWatcher | None = None

    async def open(
        self,
        table: TimerTable,
        trigger: Trigger,
        pool: WorkerPool,
        commits: Commits,
        stats: Counters,
        check: RequestChecker,
        clock: Clock,
        events: EventBus,
        limits: Limits,
    ) -> NodeScheduler:
        """Connect, take partitions, load their horizon, start the loops; returns the
        engine's storage."""
        store = await PostgresStore.open(
            self.url,
            node=self.name,
            lease=self.lease,
            horizon=self.horizon,
            connect_timeout=self.connect_timeout,
        )
        try:
            adopter = Adopter(table, trigger, pool, store, self.records, events)
            limiter = ClusterLimiter(store, limits, table, clock)
            await limiter.register()  # this node's cluster-wide limits, before any claim
            sink = NodeSink(store, adopter, table, trigger, limiter)
            pool.start_guard = sink.may_start  # fenced again as each handler starts
            self._keeper = LeaseKeeper(store, adopter, sink)
            self._feed = FeedReader(store, adopter, self._keeper.wake)
            self._refiller = Refiller(store, adopter, self.retention, self.max_retained)
            self._capped = CappedReader(store, adopter, limits)
            self._capped.sync()  # limited handlers are read on cursors of their own
            await store.start_feed()  # before the first load: nothing falls between the two
            await self._keeper.round()
            await adopter.adopt(await store.refill())
        except BaseException:
            await store.close()
            raise
        self.store, self._sink, self._limiter = store, sink, limiter
        commits.install(sink)
        self._start()
        scheduler = NodeScheduler(store, adopter, table, pool, stats, clock, events, check)
        self.transactions = JoinedWrites(scheduler, store)  # issue 27: connection=
        return scheduler

    def _start(self) -> None:
        """Run the lease loop, the change feed and the refill (until :meth:`stop`). Their
        first rounds come a period later; until the engine's trigger starts they only fill
        the wheel."""
        loop = asyncio.get_running_loop()
        for name, work in (
            ("leases", self._keeper.run()),
            ("feed", self._feed.run()),
            ("refill", self._refiller.run()),
            ("capped refill", self._capped.run()),
        ):
            self._tasks.append(loop.create_task(work, name=f"wheel-engine {self.name} {name}"))

    async def stop(self) -> None:
        """End the loops (the store is closed by the engine's commit path afterwards).

        Bounded: a loop that has not ended :data:`STOP_WAIT` seconds after its cancel is
        logged and left behind, so ``close()`` never hangs on one."""
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        if not tasks:
            return
        _, stuck = await asyncio.wait(tasks, timeout=STOP_WAIT)
        for task in stuck:
            logger.warning("node %s: %s did not stop within %s s", self.name, task, STOP_WAIT)

    def stats(self) -> dict[str, Any]:
        """This node's name, the partitions it may fire in now, what its firing path did
        about faults (``node_faults``: see ``NodeSink.stats``), and per cluster-limited handler
        the cluster's running attempts and tokens as its last claim here saw them."""
        store = self.store
        held = [] if store is None or store.closed else store.held()
        faults = {} if self._sink is None else self._sink.stats()
        seen = {} if self._limiter is None else dict(self._limiter.seen)
        return {"node": self.name, "partitions": held, "node_faults": faults, "cluster": seen}
