"""What a stored row means for this node's timer table: adopt it, drop a stale entry, or stop a
running handler.

Rows reach a node from the horizon loader, the change feed and its own writes, at least once
and in any order, so :meth:`Adopter.row` goes by version: a row older than what the node holds
changes nothing, and a row of the version it holds changes nothing while that version is live
here (the node's own claim or retry may be in flight, ahead of the database). Otherwise the
database is the authority:

- a PENDING row of a partition this node may fire, within the loaded horizon, goes into the
  wheel (replacing an older version); one beyond the horizon only takes an older version out
  (the loader brings the new one in time);
- a finished row (SUCCEEDED, CANCELED, DEAD) replaces the node's pending entry, so ``get()``
  tells how it ended; a CANCELED one is told as this node's own cancel would be (the
  ``canceled`` event: a cancel made on another node, which held no entry to tell it by);
- a RUNNING row whose cancel was requested cancels the handler's task if it runs here; one
  running elsewhere (claimed under another epoch) takes the node's pending entry out.

Some rows never fire but are needed by timers that do (recurring's records, #25, due in 9999,
beyond any horizon): a :class:`RecordWatcher` is handed each such row the node sees, and
:meth:`Adopter.adopt` reads the ones the timers of a load need, in one query, before placing
them, so that a node which takes a partition over holds what its timers need before they fire.

Guaranteed: a stale entry left in the wheel can never fire twice or early, since every attempt
is a compare-and-set in the database (:mod:`wheel_engine.nodes.sink`); this module only keeps
the wheel close to the database so that few of them are tried.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Sequence
from typing import Protocol

from journal.errors import JournalError
from journal.postgres import PostgresStore, StoredTimer
from wheel_engine.events import EventBus
from wheel_engine.timer import INTERRUPT_CANCEL, Timer, recovered_timer
from wheel_engine.timers import CANCELED, PENDING, RUNNING, TimerTable
from wheel_engine.trigger import Trigger
from wheel_engine.workers import WorkerPool

__all__ = ["Adopter", "RecordWatcher", "timer_of"]

logger = logging.getLogger(__name__)


class RecordWatcher(Protocol):
    """Keeps the rows of one handler that never fire (recurring's records), for the timers
    that need them (recurring's occurrences); nodes know nothing more of them."""

    @property
    def handler(self) -> str:
        """The handler of the rows it keeps."""
        ...

    def keep(self, row: StoredTimer) -> None:
        """``row`` (of :attr:`handler`, in any state) was read or changed: keep what it says."""

    def needs(self, rows: Iterable[StoredTimer]) -> set[str]:
        """The keys of the rows to keep that ``rows`` need before they fire here, if not kept
        yet."""


def timer_of(row: StoredTimer) -> Timer:
    """A table entry for ``row``: the one row -> timer constructor recovery uses
    (:func:`~wheel_engine.timer.recovered_timer`), so its payload is decoded on first use; plus
    the trace the row carries, whichever node wrote it (tracing, #29)."""
    timer = recovered_timer(
        row.key,
        row.version,
        row.handler,
        row.due,
        row.payload,
        row.state,
        row.attempts,
        row.last_error,
        row.first_attempt_at,
        row.updated_at,
    )
    timer.trace = row.trace
    return timer


class Adopter:
    """Applies stored rows to the table (see the module docstring). Runs on the loop."""

    __slots__ = ("_events", "_pool", "_store", "_table", "_trigger", "_watcher")

    def __init__(
        self,
        table: TimerTable,
        trigger: Trigger,
        pool: WorkerPool,
        store: PostgresStore,
        watcher: RecordWatcher | None = None,
        events: EventBus | None = None,
    ) -> None:
        self._events = events
        self._table = table
        self._trigger = trigger
        self._pool = pool
        self._store = store
        self._watcher = watcher

    async def adopt(self, rows: Sequence[StoredTimer]) -> None:
        """:meth:`rows`, once the watched rows they need are read (one query for the lot).
        For the loads of partitions and horizons; if that read fails (logged) the rows are
        applied all the same: a timer that finds nothing kept looks it up itself."""
        watcher = self._watcher
        if watcher is not None:
            wanted = watcher.needs(rows)
            if wanted:
                try:
                    for record in await self._store.lookup_many(sorted(wanted)):
                        watcher.keep(record)
                except JournalError as exc:
                    node, count = self._store.node, len(wanted)
                    logger.warning("node %s could not read %d record(s): %s", node, count, exc)
        self.rows(rows)

    def rows(self, rows: Iterable[StoredTimer]) -> None:
        """Apply ``rows`` in order, then arm the clock once."""
        placed = False
        for row in rows:
            placed = self.row(row) or placed
        if placed:
            self._trigger.arm()

    def arm(self) -> None:
        """Arm the clock for timers :meth:`row` placed."""
        self._trigger.arm()

    def row(self, row: StoredTimer) -> bool:
        """Apply one row; True if a timer went into the wheel (the caller arms)."""
        watcher = self._watcher
        if watcher is not None and row.handler == watcher.handler:
            watcher.keep(row)  # due beyond any horizon: never placed below
        local = self._table.timers.get(row.key)
        if local is not None and local.version > row.version:
            return False
        if local is not None and local.version == row.version and local.state.is_live:
            if local.state is RUNNING and row.cancel_requested:
                self._pool.interrupt(local, INTERRUPT_CANCEL)
            elif local.state is PENDING and row.state is RUNNING and not self._ours(row):
                self.forget(local)  # claimed by another node (the partition moved meanwhile)
            elif local.state is PENDING and not row.state.is_live:
                self._finished(local, row)  # cancelled (or finished) elsewhere
            return False
        if row.state is PENDING:
            return self._pending(local, row)
        if local is not None and local.state is PENDING:
            if row.state is RUNNING:
                self.forget(local)
            else:
                self._finished(local, row)
        return False

    def _ours(self, row: StoredTimer) -> bool:
        """``row`` was claimed by this node under the epoch it holds (its retry is in flight)."""
        lease = self._store.leases.owned.get(row.partition)
        return lease is not None and row.run_epoch == lease.epoch

    def _pending(self, local: Timer | None, row: StoredTimer) -> bool:
        held = row.partition in self._store.leases.owned
        if not held or not self._store.horizon.adopts(row.due, row.version, row.handler):
            if local is not None and local.state is not RUNNING:
                self.forget(local)  # replaced or redriven; its owner's loader brings it in time
            return False
        table = self._table
        if local is not None and local.state is PENDING:
            table.unplace(local)
        fresh = timer_of(row)
        table.replace(fresh, local)  # an older version running here runs on; its ack is refused
        table.place(fresh)
        return True

    def _finished(self, local: Timer, row: StoredTimer) -> None:
        table = self._table
        if local.state is PENDING:
            table.unplace(local)
        fresh = timer_of(row)
        table.replace(fresh, local)
        table.finish(fresh, row.state, row.updated_at)
        events = self._events
        if events is not None and events.active and row.state is CANCELED:
            events.canceled(fresh, row.updated_at)

    def forget(self, timer: Timer) -> None:
        """This node no longer holds ``timer`` (another node owns it now, or it was refused)."""
        self._table.forget(timer)

    def forget_version(self, key: str, version: int) -> None:
        """Forget ``key`` if the table holds that version and it does not run here: a row read
        again then goes back into the wheel even though the table held it already."""
        local = self._table.timers.get(key)
        if local is not None and local.version == version and local.state is not RUNNING:
            self.forget(local)

    def drop_partitions(self, partitions: Collection[int]) -> int:
        """Take the pending timers of ``partitions`` out (lost or given up); returns how many.
        Running ones run on: their outcome is refused if the new owner has moved on."""
        if not partitions:
            return 0
        chosen = set(partitions)
        partition_of = self._store.partition_of
        stale = [
            timer
            for timer in self._table.timers.values()
            if timer.state is PENDING and partition_of(timer.key) in chosen
        ]
        for timer in stale:
            self.forget(timer)
        return len(stale)
