"""The firing path's records, as PostgreSQL statements: attempts as one compare-and-set per
group, outcomes fenced by the claim's epoch.

:class:`NodeSink` is the :class:`~wheel_engine.storage.RecordSink` of a node: the starter and
the outcomes hand it the same records they hand the SQLite journal, and it turns them into
:class:`~journal.postgres.PostgresStore` calls, each in a task of its own (the pool runs a few
at once):

- a group of ``Attempt`` records is one :meth:`~journal.postgres.PostgresStore.attempt`; its
  future's result is a :class:`NodeClaims`, which the starter asks about each timer. A claimed
  one runs, and its epoch is kept until its outcome is written; one not due yet by the
  database's clock goes back into the wheel for the time the database says is left; one the
  node may not fire now (its lease is near its end) tries again a moment later; the rest
  were lost (replaced, cancelled, claimed elsewhere, partition moved) and leave the table;
- ``Ack``, ``Cancel``, ``Retry`` and ``Dead`` of claimed attempts are written together: the
  outcomes submitted while one :meth:`~journal.postgres.PostgresStore.finish` is in flight (or
  in the same loop iteration) wait in an outbox and become the next single statement, so a
  burst costs one round trip per batch, not one per ack. Each is fenced by key, version,
  state and epoch; a
  refused one (another node owns the outcome now) takes the timer out of the table. A
  ``Dead`` with no claim (its last attempt was interrupted, on this node or a dead one) is
  :meth:`~journal.postgres.PostgresStore.give_up`.

An attempt whose statement failed (the database unreachable) is given back with ``unclaim``
before the starter retries it, so nothing stays RUNNING under a live owner.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, Final

from journal import Ack, Attempt, Cancel, Dead, Record, Retry
from journal.errors import JournalError
from journal.postgres import AttemptResult, Outcome, PostgresStore
from journal.state import CANCELED, DEAD, PENDING, SUCCEEDED
from wheel_engine.firing import Trigger
from wheel_engine.nodes.adopting import Adopter
from wheel_engine.timer import Timer
from wheel_engine.timers import RUNNING, TimerTable

__all__ = ["NodeClaims", "NodeSink"]

logger = logging.getLogger(__name__)

#: Seconds before a timer whose lease was too near its end to fire it is tried again.
UNUSABLE_RETRY: Final = 0.2


class NodeClaims:
    """One attempt statement's answer (see :class:`~wheel_engine.storage.Claims`)."""

    __slots__ = ("_early", "_result", "_sink", "_unsent")

    def __init__(self, sink: NodeSink, result: AttemptResult, unsent: set[str]) -> None:
        self._sink = sink
        self._result = {(c.key, c.version): c for c in result.claimed}
        db_now = result.db_now
        self._early = {key: due - db_now for key, due in result.early} if db_now else {}
        self._unsent = unsent  # not asked: their lease was too near its end to fire

    def keep(self, timer: Timer) -> bool:
        claimed = self._result.get((timer.key, timer.version))
        sink = self._sink
        if claimed is not None:
            timer.attempts = claimed.attempt  # the database counts across nodes and crashes
            timer.first_attempt_at = claimed.first_attempt_at
            sink.epochs[timer.key] = (timer.version, claimed.epoch)
            return True
        _uncharge(timer)
        if timer.state is not PENDING:
            return False  # cancelled here meanwhile
        wait = self._early.get(timer.key)
        held = sink.store.partition_of(timer.key) in sink.store.leases.owned
        if wait is None and timer.key in self._unsent and held:
            wait = UNUSABLE_RETRY  # still held: try again once the lease is renewed
        if wait is None:
            sink.adopter.forget(timer)
        else:
            sink.retry_later(timer, wait)
        return False


def _uncharge(timer: Timer) -> None:
    """Undo the starter's charge of an attempt that was not claimed."""
    if timer.state is RUNNING:
        timer.state = PENDING
        timer.attempts -= 1
        if timer.attempts == 0:
            timer.first_attempt_at = None


class NodeSink:
    """A node's :class:`~wheel_engine.storage.RecordSink` (see the module docstring)."""

    def __init__(
        self,
        store: PostgresStore,
        adopter: Adopter,
        table: TimerTable,
        trigger: Trigger,
    ) -> None:
        self.store = store
        self.adopter = adopter
        #: key -> (version, epoch) of each attempt claimed here whose outcome is not written.
        self.epochs: dict[str, tuple[int, int]] = {}
        self._table = table
        self._trigger = trigger
        self._tasks: set[asyncio.Future[Any]] = set()
        self._closed = False
        #: Outcome records waiting for the next finish statement, and that statement's future.
        self._outbox: list[Record] = []
        self._outbox_written: asyncio.Future[None] | None = None
        self._writing = False  # a task is writing the outbox (one statement in flight)

    # ------------------------------------------------------------------ RecordSink
    @property
    def path(self) -> str:
        return self.store.where

    @property
    def tail_records(self) -> int:
        return 0  # nothing to compact: owners prune finished rows instead

    def submit_rows(self, rows: list[tuple[int, bytes]]) -> asyncio.Future[None]:
        """Never called: a node's schedules, cancels and redrives go to the store itself
        (:class:`~wheel_engine.nodes.scheduler.NodeScheduler`), not through encoded rows."""
        raise JournalError("encoded rows are not written to PostgreSQL; the store takes requests")

    def submit_row(self, kind: int, body: bytes) -> asyncio.Future[None]:
        """Never called either: see :meth:`submit_rows`."""
        return self.submit_rows([(kind, body)])

    def submit(self, records: list[Record]) -> asyncio.Future[Any]:
        if self._closed or self.store.closed:
            raise JournalError(f"PostgreSQL journal is closed: {self.store.where}")
        first = records[0] if records else None
        if isinstance(first, Attempt):
            return self._spawn(self._attempt(records))
        return self._queue_outcomes(records)

    def busy(self) -> bool:
        return bool(self._tasks)

    async def flush(self) -> None:
        while self._tasks:
            await asyncio.wait(set(self._tasks))

    async def close(self) -> None:
        """Wait for the writes in flight, then release the partitions and disconnect."""
        await self.flush()
        self._closed = True
        await self.store.close()

    async def compact(self, *, retention: float, now: float, max_retained: int) -> int:
        """Prune the finished rows of the held partitions older than ``retention`` or beyond
        the journal's newest ``max_retained``."""
        return await self.store.prune(retention, max_retained=max_retained)

    # ------------------------------------------------------------------ attempts
    def _spawn(self, work: Coroutine[Any, Any, Any]) -> asyncio.Future[Any]:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _attempt(self, records: list[Record]) -> NodeClaims:
        pairs = [(record.key, record.version) for record in records]
        store = self.store
        epoch_of, partition_of = store.leases.epoch_of, store.partition_of
        # What store.attempt leaves out, decided at the same instant (before its first await).
        unsent = {key for key, _ in pairs if epoch_of(partition_of(key)) is None}
        try:
            result = await store.attempt(pairs)
        except JournalError:
            # Its commit may have happened: give back whatever it claimed, then fail the group
            # (the starter tries again in a moment). If this fails too, the row stays RUNNING
            # under this node's epoch until the partition changes hands.
            try:
                await store.unclaim(pairs)
            except JournalError:
                logger.warning("could not give back %d attempt(s)", len(pairs))
            raise
        return NodeClaims(self, result, unsent)

    def retry_later(self, timer: Timer, wait: float) -> None:
        """Back into the wheel after ``wait`` seconds (the database says it is not due yet)."""
        loop = asyncio.get_running_loop()
        loop.call_later(max(wait, 0.0) + self._table.tick, self._reinsert, timer)

    def _reinsert(self, timer: Timer) -> None:
        if (
            self._closed
            or timer.state is not PENDING
            or self._table.timers.get(timer.key) is not timer
        ):
            return
        self._table.insert(timer)
        self._trigger.arm()

    # ------------------------------------------------------------------ outcomes
    def _queue_outcomes(self, records: list[Record]) -> asyncio.Future[None]:
        """Add ``records`` to the outbox; the future is done once their statement is."""
        self._outbox.extend(records)
        written = self._outbox_written
        if written is None:
            written = self._outbox_written = asyncio.get_running_loop().create_future()
            if not self._writing:
                self._writing = True
                self._spawn(self._write_outbox())
        return written

    async def _write_outbox(self) -> None:
        """Write the outbox, one statement at a time, until it stays empty."""
        try:
            while self._outbox_written is not None:
                records, written = self._outbox, self._outbox_written
                self._outbox, self._outbox_written = [], None
                try:
                    await self._finish(records)
                except Exception as exc:  # the callers log it (Commits.write)
                    written.set_exception(exc)
                except BaseException:
                    written.cancel()
                    raise
                else:
                    written.set_result(None)
        finally:
            self._writing = False
            if self._outbox_written is not None:  # cancelled with more waiting
                self._outbox_written.cancel()
                self._outbox, self._outbox_written = [], None

    async def _finish(self, records: list[Record]) -> None:
        outcomes: list[Outcome] = []
        orphans: list[tuple[str, int, str]] = []
        for record in records:
            claim = self.epochs.get(record.key)
            if claim is None or claim[0] != record.version:
                if isinstance(record, Dead):
                    orphans.append((record.key, record.version, record.error))
                continue  # not claimed here: nothing of ours to record
            del self.epochs[record.key]
            outcomes.append(_outcome(record, claim[1]))
        if outcomes:
            accepted = await self.store.finish(outcomes)
            self._refused([o for o in outcomes if o.key not in accepted])
        if orphans:
            await self.store.give_up(orphans)

    def _refused(self, outcomes: list[Outcome]) -> None:
        """Fenced out: another node owns these timers now, or a newer version replaced them."""
        for outcome in outcomes:
            timer = self._table.timers.get(outcome.key)
            if timer is not None and timer.version == outcome.version and timer.state is PENDING:
                self.adopter.forget(timer)  # its retry belongs to the new owner
        if outcomes:
            logger.info("%d outcome(s) refused: their partition changed hands", len(outcomes))


def _outcome(record: Record, epoch: int) -> Outcome:
    if isinstance(record, Ack):
        return Outcome(record.key, record.version, epoch, SUCCEEDED)
    if isinstance(record, Cancel):
        return Outcome(record.key, record.version, epoch, CANCELED)
    if isinstance(record, Retry):
        return Outcome(record.key, record.version, epoch, PENDING, record.error, record.due)
    assert isinstance(record, Dead), record
    return Outcome(record.key, record.version, epoch, DEAD, record.error)
