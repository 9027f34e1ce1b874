"""The firing path's records, as PostgreSQL statements: attempts as one compare-and-set per
group, fenced again when their reply is handled; outcomes fenced by the claim's epoch.

:class:`NodeSink` is the :class:`~wheel_engine.storage.RecordSink` of a node: the starter and
the outcomes hand it the same records they hand the SQLite journal, and it turns them into
:class:`~journal.postgres.PostgresStore` calls, each in a task of its own (the pool runs a few
at once):

- a group of ``Attempt`` records (a start group's part) is one claim statement, sent with the
  epochs this node holds at that instant; its future's result is a :class:`NodeClaims`, which
  the starter asks about each timer just before it would start. A claimed one runs only if the
  lease it was claimed under is **still usable** by this node's monotonic clock
  (``Leases.usable_at``: the same epoch, before a deadline measured from before the lease's last
  renewal was sent). The database fenced the claim when the statement ran, but the reply may be
  handled much later (the node was paused, the loop was busy): a claim whose lease may have
  lapsed meanwhile is dropped unrun and uncharged, and given back (``unclaim``, fenced by its
  epoch: a taker's reset has already returned it otherwise). One not due yet by the database's
  clock goes back into the wheel for the time the database says is left; one the node may not
  fire now (its lease is near its end) tries again a moment later; one that claimed nothing else
  leaves the table and, if its partition is still held here, is read again
  (:mod:`wheel_engine.nodes.rereading`): its statement may have run after the lease had lapsed
  in the database, with the row still PENDING; its ``successors`` (#25) commit with it;
- outcomes go through the :class:`~wheel_engine.nodes.outbox.Outbox` (batched, retried).

A failed attempt statement is given back (``unclaim``, else by the reconcile after the outage).

Every claim in flight (sent, its reply or give-back not handled) or whose outcome is unwritten
counts in :meth:`NodeSink.busy_in`: its partition is not released while a version may run here.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Coroutine, Sequence
from typing import Any, Final

from journal import Attempt, Record
from journal.errors import JournalError
from journal.postgres import AttemptResult, PostgresStore, SuccessorRow
from wheel_engine.nodes.adopting import Adopter
from wheel_engine.nodes.limited import ClusterLimiter
from wheel_engine.nodes.outbox import Claim, Outbox
from wheel_engine.nodes.rereading import Rereader
from wheel_engine.timer import Timer
from wheel_engine.timers import PENDING, RUNNING, TimerTable
from wheel_engine.trigger import Trigger

__all__ = ["NodeClaims", "NodeSink"]

logger = logging.getLogger(__name__)

#: Seconds before a timer whose lease was too near its end to fire it is tried again.
UNUSABLE_RETRY: Final = 0.2


class NodeClaims:
    """One attempt statement's answer (see :class:`~wheel_engine.storage.Claims`)."""

    __slots__ = (
        "_early",
        "_fenced",
        "_refused",
        "_result",
        "_sent",
        "_sink",
        "_unsent",
        "_usable_at",
        "chained",
    )

    def __init__(
        self,
        sink: NodeSink,
        result: AttemptResult,
        unsent: set[str],
        sent: list[str],
        refused: set[str],
    ) -> None:
        self._sink = sink
        self.chained = result.chained  # successors this claim inserted, placed by the sink
        self._refused = refused  # a cluster-limited handler's row had no token or slot for them
        self._result = {(c.key, c.version): c for c in result.claimed}
        db_now = result.db_now
        self._early = {key: due - db_now for key, due in result.early} if db_now else {}
        self._unsent = unsent  # not asked: their lease was too near its end to fire
        self._sent = set(sent)  # asked: in flight until settled here
        self._fenced = 0
        self._usable_at: dict[int, bool] = {}  # partition -> its claim's lease usable now

    def undo_unless_claimed(self, timer: Timer) -> bool:
        """See :meth:`wheel_engine.storage.Claims.undo_unless_claimed`. Claimed but under a
        lease that may have lapsed since: given back to the store, uncharged, False."""
        sink = self._sink
        key = timer.key
        if key in self._sent:
            self._sent.discard(key)
            sink.settled(key)
        claimed = self._result.get((key, timer.version))
        partition = sink.store.partition_of(key)
        if claimed is not None:
            if self._usable(partition, claimed.epoch):
                timer.attempts = claimed.attempt  # the database counts across nodes and crashes
                timer.first_attempt_at = claimed.first_attempt_at
                sink.epochs[key] = (timer.version, claimed.epoch, claimed.attempt)
                return True
            self._fenced += 1
            if self._fenced == 1:
                logger.warning(
                    "node %s: a claim's reply came after its lease's deadline (timer %s, ...):"
                    " not run, given back",
                    sink.store.node,
                    key,
                )
            sink.give_back(timer, claimed.epoch)
            return False
        _uncharge(timer)
        if timer.state is not PENDING:
            return False  # cancelled here meanwhile
        if key in self._refused and sink.limiter.put_back(timer):
            return False  # waits in its gate, uncharged, to be asked about again
        wait = self._early.get(key)
        held = partition in sink.store.leases.owned
        if wait is None and key in self._unsent and held:
            wait = UNUSABLE_RETRY  # still held: try again once the lease is renewed
        if wait is not None:
            sink.retry_later(timer, wait)
            return False
        # Replaced, cancelled or claimed elsewhere; or the statement ran after the lease had
        # lapsed in the database (the row still PENDING): the row read again tells which.
        sink.adopter.forget(timer)
        if held:
            sink.dropped["unclaimed, read again"] += 1
            sink.rereader.ask(key)
        else:
            sink.dropped["partition no longer held"] += 1
        return False

    def _usable(self, partition: int, epoch: int) -> bool:
        """``Leases.usable_at``, asked once per partition: the starter asks about a whole
        group in one synchronous step, so the answer holds for all of it."""
        usable = self._usable_at.get(partition)
        if usable is None:
            usable = self._usable_at[partition] = self._sink.store.leases.usable_at(
                partition, epoch
            )
        return usable


def _uncharge(timer: Timer) -> None:
    """Undo the starter's charge of an attempt that was not claimed (or not run), unless it
    ended here meanwhile (cancelled, or its version's schedule undone)."""
    if timer.state is RUNNING:
        timer.uncharge()


class NodeSink:
    """A node's :class:`~wheel_engine.storage.RecordSink` (see the module docstring). No
    :class:`~wheel_engine.storage.RowSink`: a node's schedules, cancels and redrives go to the
    store itself (:class:`~wheel_engine.nodes.scheduler.NodeScheduler`), never as rows."""

    def __init__(
        self,
        store: PostgresStore,
        adopter: Adopter,
        table: TimerTable,
        trigger: Trigger,
        limiter: ClusterLimiter,
    ) -> None:
        self.store = store
        self.adopter = adopter
        self.limiter = limiter
        #: key -> (version, epoch, attempt) of each attempt claimed here whose outcome is not
        #: written (or given up) yet.
        self.epochs: dict[str, Claim] = {}
        #: key -> claims of it in flight: attempt statements sent whose reply is not handled
        #: yet, and give-backs on their way.
        self.claiming: Counter[str] = Counter()
        #: Why timers left the wheel on the firing path, with counts (``Engine.stats()``).
        self.dropped: Counter[str] = Counter()
        #: Set when a statement could not reach the database: the lease loop reconciles.
        self.failed = False
        self.rereader = Rereader(store, adopter, self.in_flight)
        self.outbox = Outbox(store, adopter, table, self.epochs, self.rereader.ask, self.fail)
        self._table = table
        self._trigger = trigger
        self._tasks: set[asyncio.Future[Any]] = set()
        self._closed = False

    def in_flight(self, key: str) -> bool:
        """A claim of ``key`` is on its way, or its handler or outcome is (see ``epochs``)."""
        return key in self.epochs or key in self.claiming

    def busy_in(self, partition: int) -> bool:
        """A claim, handler or outcome of this node is in flight in ``partition``."""
        partition_of = self.store.partition_of
        return any(partition_of(key) == partition for key in self.epochs) or any(
            partition_of(key) == partition for key in self.claiming
        )

    def settled(self, key: str) -> None:
        """One claim of ``key`` in flight is handled."""
        left = self.claiming[key] - 1
        if left > 0:
            self.claiming[key] = left
        else:
            del self.claiming[key]

    def fail(self) -> None:
        self.failed = True

    # ------------------------------------------------------------------ RecordSink
    @property
    def path(self) -> str:
        return self.store.where

    @property
    def tail_records(self) -> int:
        return 0  # no log to compact: owners prune finished rows instead (``compact``)

    def submit(
        self, records: list[Record], successors: Sequence[SuccessorRow] = ()
    ) -> asyncio.Future[Any]:
        if self._closed or self.store.closed:
            raise JournalError(f"PostgreSQL journal is closed: {self.store.where}")
        first = records[0] if records else None
        if isinstance(first, Attempt):
            handler = self.limiter.part_handler(first.key)  # now: the table as it took them
            return self._spawn(self._attempt(self._requests(records), successors, handler))
        waiter, start = self.outbox.queue(records)
        if start:
            self._spawn(self.outbox.write())
        return waiter

    def busy(self) -> bool:
        return bool(self._tasks)

    async def flush(self) -> None:
        while self._tasks:
            await asyncio.wait(set(self._tasks))

    async def close(self) -> None:
        """Wait for the writes in flight, then release the partitions and disconnect."""
        await self.flush()
        self._closed = True
        await self.rereader.close()
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

    def _requests(self, records: list[Record]) -> list[tuple[str, int, int, int] | str]:
        """Each attempt fenced by the epoch this node holds now (called in ``submit``, so in
        flight from that instant): ``(key, version, partition, epoch)``, or the key alone if
        its lease is not usable now (not sent)."""
        store = self.store
        epoch_of, partition_of = store.leases.epoch_of, store.partition_of
        requests: list[tuple[str, int, int, int] | str] = []
        for record in records:
            partition = partition_of(record.key)
            epoch = epoch_of(partition)
            if epoch is None:
                requests.append(record.key)
            else:
                requests.append((record.key, record.version, partition, epoch))
                self.claiming[record.key] += 1
        return requests

    async def _attempt(
        self,
        requests: list[tuple[str, int, int, int] | str],
        successors: Sequence[SuccessorRow],
        handler: str | None,
    ) -> NodeClaims:
        unsent = {r for r in requests if isinstance(r, str)}
        sent = [r for r in requests if not isinstance(r, str)]
        keys = [key for key, *_ in sent]
        try:
            result, refused = await self._claim(sent, successors, handler)
        except JournalError:
            # Its commit may have happened: give back whatever it claimed, then fail the group
            # (the starter tries again in a moment). If this fails too, the rows stay RUNNING
            # under this node's epoch until the reconcile after the outage.
            self.failed = True
            try:
                await self.store.unclaim_at([(k, v, e) for k, v, _, e in sent])
            except JournalError:
                logger.warning("could not give back %d attempt(s)", len(sent))
            finally:
                self._settle_all(keys)
            raise
        except BaseException:
            self._settle_all(keys)
            raise
        self.adopter.rows(result.chained)  # in its name's partition: this node's, like its own
        return NodeClaims(self, result, unsent, keys, refused)

    async def _claim(
        self,
        sent: list[tuple[str, int, int, int]],
        successors: Sequence[SuccessorRow],
        handler: str | None,
    ) -> tuple[AttemptResult, set[str]]:
        """One start group's part (:mod:`wheel_engine.start_parts`) in one claim statement:
        cluster-limited ``handler``'s through its row (:mod:`.limited`), the plain part's
        (``handler`` None) with its ``successors``; its answer, and the keys the limits refused.
        Recurring's occurrences, the only timers with successors, are never limited."""
        if handler is None or not sent:
            return await self.store.claim(sent, successors), set()
        reply = await self.limiter.claim(handler, sent)
        return reply.result, set(reply.refused)

    def _settle_all(self, keys: list[str]) -> None:
        for key in keys:
            self.settled(key)

    def give_back(self, timer: Timer, epoch: int) -> None:
        """``timer``'s claim under ``epoch`` is not run (see
        :meth:`NodeClaims.undo_unless_claimed` and :meth:`may_start`): its charge is undone,
        it leaves the table, its row is given back under that epoch, then read again if its
        partition is held."""
        _uncharge(timer)
        self.adopter.forget(timer)
        self.dropped["claim past its lease, given back"] += 1
        self.claiming[timer.key] += 1
        self._spawn(self._give_back(timer.key, timer.version, epoch))

    def may_start(self, timer: Timer) -> bool:
        """The worker pool's start guard (``WorkerPool.start_guard``): True if the lease that
        ``timer``'s attempt was claimed under is still usable, now, as its handler is about to
        start. A claim :meth:`NodeClaims.undo_unless_claimed` let run waits a loop turn for a
        worker task, and a pause of this process can fall right there: then the attempt is not
        run, not charged here, and given back under its epoch, as a late claim's reply is."""
        claim = self.epochs.get(timer.key)
        if claim is None or claim[0] != timer.version:
            return True  # no claim of this node's in flight for it: nothing to fence
        epoch = claim[1]
        if self.store.leases.usable_at(self.store.partition_of(timer.key), epoch):
            return True
        del self.epochs[timer.key]
        self.give_back(timer, epoch)
        return False

    async def _give_back(self, key: str, version: int, epoch: int) -> None:
        try:
            await self.store.unclaim_at([(key, version, epoch)])
        except JournalError as exc:
            self.failed = True  # left RUNNING under that epoch: a takeover or reconcile returns it
            logger.warning("could not give back the claim of timer %s: %s", key, exc)
        finally:
            self.settled(key)
        if self.store.partition_of(key) in self.store.leases.owned and not self._closed:
            self.rereader.ask(key)

    def retry_later(self, timer: Timer, wait: float) -> None:
        """Back into the wheel after ``wait`` seconds (the database says it is not due yet)."""
        loop = asyncio.get_running_loop()
        loop.call_later(max(wait, 0.0) + self._table.tick, self._reinsert, timer)

    def _reinsert(self, timer: Timer) -> None:
        if self._closed or timer.state is not PENDING or not self._table.timers.holds(timer):
            return
        self._table.insert(timer)
        self._trigger.arm()

    def stats(self) -> dict[str, Any]:
        """What the firing path did about faults (all zero in a quiet run)."""
        return {
            "claims_in_flight": sum(self.claiming.values()),
            "outcomes_unwritten": len(self.epochs),
            "outcome_retries": self.outbox.retried,
            "outcomes_given_up": self.outbox.abandoned,
            "reread": self.rereader.reread,
            "requeued": self.rereader.requeued,
            "dropped": dict(self.dropped),
        }
