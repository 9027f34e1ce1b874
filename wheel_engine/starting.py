"""Starting due timers: the queue, start groups, their attempt commits, and inline handlers.

Due timers wait in :class:`Starter`'s queue, still PENDING and not charged. What can start now
is taken from its head as one **group**: up to ``INLINE_BATCH`` plain handlers (run on the loop,
one group in flight at a time) followed by as many others as there are free worker slots. The
group's attempts are committed in one journal write, and its handlers start once that commit is
done: a timer still queued is never charged (SPEC guarantee 5). The queue's order is kept: the
first timer that cannot start stops the group. Plain handlers run right here, like ``call_at``
callbacks; the others go to :class:`wheel_engine.workers.WorkerPool`.

A **crash suspect** (a timer whose last attempt a crash cut short) starts alone; see
:meth:`Starter.suspect_started` for why.

Where the sink's commits are done at once (``Commits.instant``, the in-memory engine: read once
at :meth:`Starter.start`), a group's claim succeeds at once: it runs without an attempt commit,
a freed worker slot takes the queue's head directly, and plain handlers may run off the queue
(:mod:`.inline`).

Per-handler limits plug in at :attr:`Starter.admit` (:mod:`wheel_engine.limits`).

Everything here runs on the loop thread: a decision and the state change it leads to happen in
one synchronous step, so there are no locks.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import deque
from collections.abc import Callable
from typing import Any

from journal import Attempt, Record
from wheel_engine.clock import Clock
from wheel_engine.commits import Commits, log_attempts_failure
from wheel_engine.events import EventBus
from wheel_engine.handlers import HandlerSpec
from wheel_engine.inline import InlineRunner
from wheel_engine.limits import Limits
from wheel_engine.outcomes import Outcomes
from wheel_engine.plain_group import run_plain_group
from wheel_engine.stats import Counters
from wheel_engine.storage import Claims
from wheel_engine.timer import INTERRUPT_CRASH, QUEUED, Timer
from wheel_engine.timers import RUNNING, TimerTable
from wheel_engine.workers import SlotOwner, WorkerPool

INLINE_BATCH = 1024  # inline handlers run per loop callback before yielding to other work
JOURNAL_RETRY_DELAY = 1.0  # seconds before re-dispatching a batch whose attempt commit failed

_new_tuple = tuple.__new__


class Starter(SlotOwner):
    """The queue of due timers and the groups that start from it; see the module docstring.

    ``running`` counts attempts started (or committing) and not yet ended; ``idle`` is set
    while it is zero. ``alone`` is the crash suspect starting alone, if any.

    ``admit`` is the admission seam (per-handler concurrency or rate limits): asked about a due
    timer right before it is taken into a start group. False: not now; it stays queued,
    uncharged, and the group ends there (the queue's order is kept); whoever said False calls
    :meth:`start_later` once it would admit again. None: all are admitted (and the in-memory
    common case may run plain handlers off the queue, :meth:`_inline_now`).
    """

    def __init__(
        self,
        table: TimerTable,
        commits: Commits,
        stats: Counters,
        clock: Clock,
        events: EventBus,
        *,
        arm: Callable[[], None],
        max_concurrency: int,
        max_error_bytes: int,
    ) -> None:
        self.running = 0
        self.idle = asyncio.Event()  # set while no attempt is running
        self.idle.set()
        self.alone: Timer | None = None
        self.closing = False
        self._table = table
        self._handlers = table.handlers
        self._commits = commits
        self._outcomes = outcomes = Outcomes(
            table, commits, stats, clock, events, arm=arm, max_error_bytes=max_error_bytes
        )
        self._stats = stats
        self._events = events
        self._clock = clock
        self._arm = arm
        self._max_concurrency = max_concurrency
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready: deque[Timer] = deque()  # due, not started, not charged: waiting to start
        self._slots = 0  # worker slots taken: attempts committing for, or running on, a worker
        self._inline_starting = False  # a group of plain handlers is committing or running
        self._start_soon = False  # a start_queued callback is scheduled
        self._attempt_commits = 0  # groups whose attempts are being committed
        self._instant = True  # the sink's commits are done at once: read at start()
        self.admit: Callable[[Timer, HandlerSpec], bool] | None = None  # see the class doc
        self.pool = WorkerPool(
            self, outcomes, table.handlers, stats, clock, events, max_concurrency=max_concurrency
        )
        self._runner = InlineRunner(table, outcomes, stats, events)
        self.limits = Limits(clock, events, self._ready, self)  # sets admit while one is limited

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start taking due timers, the store open (its sink installed in the commits)."""
        self._loop = loop
        self._instant = self._commits.instant
        self.pool.start(loop)

    # ------------------------------------------------------------------ the queue
    def enqueue(self, batch: list[Timer], now: float) -> None:
        """Due timers join the queue, in (tick, version) order; nothing is charged yet.

        The common case skips the queue: see :meth:`_inline_now`."""
        taken = 0
        if not self._ready and self._inline_now():
            self.running += 1  # the one plain handler running at a time
            taken = self._runner.run_batch(batch, now, INLINE_BATCH)
            self.running -= 1
            if taken == len(batch):
                return
            if taken:
                batch = batch[taken:]
        handlers = self._handlers
        table = self._table
        ready = self._ready
        gates = self.limits.gates  # a limited handler's due timers go to its gate (.limits)
        queued = 0
        for timer in batch:
            if timer.due > now:  # float rounding of the tick: never early, try next tick
                table.insert(timer)
                continue
            spec = handlers.get(timer.handler)
            if spec is None:
                table.park(timer)
                continue
            if timer.attempts >= spec.retry.max_attempts:
                # Recovered after its last allowed attempt was interrupted by a crash: that
                # attempt failed, and it was the last one. (Normal retries never get here.)
                self._outcomes.give_up(timer, f"attempt {timer.attempts} was interrupted", now)
                continue
            timer.where = QUEUED
            if not gates or not self.limits.arrive(timer, now):
                ready.append(timer)
            queued += 1
        if queued:
            table.queued += queued
            if taken == INLINE_BATCH:  # a group ran already: the next in a callback of its own
                self.start_later()
            else:
                self.start_queued()

    def start_queued(self) -> None:
        """Take from the head of the queue what can start now and commit those attempts."""
        self._start_soon = False
        if self.closing:
            return
        if self._inline_now():
            self.running += 1
            ran = self._runner.run_queue(self._ready, self._clock.time(), INLINE_BATCH)
            self.running -= 1
            if ran:
                self._table.purge_finished(self._clock.time())
                if ran == INLINE_BATCH:  # the rest in a callback of its own: others interleave
                    self.start_later()
                    return
        inline, pooled = self._take()
        if not inline and not pooled:
            return
        self.idle.clear()
        if self._instant:  # the group's claim succeeds at once: no attempt records to write
            self._run_batch(inline, pooled)
            return
        self._attempt_commits += 1
        now = self._clock.time()
        new = _new_tuple
        records: list[Record] = [
            new(Attempt, (timer.key, timer.version, timer.attempts, now))
            for timer in itertools.chain(inline, pooled)
        ]
        committed = self._commits.submit(records)  # never raises
        committed.add_done_callback(lambda future: self._attempts_committed(future, inline, pooled))

    def _inline_now(self) -> bool:
        """True when plain handlers may run at once, off the general path (:mod:`.inline`): in
        memory, nobody subscribed to events, no crash suspect, no group under way."""
        return (
            self._instant
            and not self.closing
            and not self._events.active
            and self.admit is None
            and self.alone is None
            and not self._inline_starting
        )

    def _take(self) -> tuple[list[Timer], list[Timer]]:
        """Pop the next group off the queue: (plain ones to run inline, ones for the workers)."""
        ready = self._ready
        handlers = self._handlers
        inline: list[Timer] = []
        pooled: list[Timer] = []
        if self.alone is not None:
            return inline, pooled
        inline_room = 0 if self._inline_starting else INLINE_BATCH
        free = self._max_concurrency - self._slots
        now = self._clock.time()
        admit = self.admit
        while ready:
            timer = ready[0]
            if timer.where != QUEUED:  # cancelled or replaced while it waited
                ready.popleft()
                continue
            spec = handlers[timer.handler]
            suspect = timer.interrupt == INTERRUPT_CRASH  # a suspect: it starts alone
            if suspect:
                if inline or pooled or self._attempt_commits or self._inline_starting:
                    break  # once everything before it has committed and started
                if not spec.inline and not free:
                    break
                to_inline = spec.inline
            elif not pooled and spec.inline:
                if not inline_room:
                    break  # it starts with the next group, once this (or the last) one ran
                to_inline = True
            elif free:
                to_inline = False
            else:
                break
            if admit is not None and not admit(timer, spec):
                break  # not now: it stays queued, uncharged (see ``admit``)
            ready.popleft()
            timer.charge(now)
            if to_inline:
                inline_room -= 1
                inline.append(timer)
            else:
                free -= 1
                pooled.append(timer)
            if suspect:
                self.alone = timer
                break
        taken = len(inline) + len(pooled)
        self._table.queued -= taken
        self.running += taken
        self._slots += len(pooled)
        if inline:
            self._inline_starting = True
        return inline, pooled

    def suspect_started(self) -> None:
        """The crash suspect's handler has run its first step (up to its first await, or to
        its end): the queue goes on in groups.

        Why suspects start alone: a timer whose attempt a crash cut short (recovery marks it
        ``INTERRUPT_CRASH``) may be a poison that kills the process. Had it started in a group,
        each crash would charge its partners once more (their attempts share its commit) and
        take them to DEAD with it, since after each restart the same group forms at the head of
        the queue. Alone, its attempt commits with no other, and the next group commits only
        after its handler has started: a handler that kills the process at once charges no one
        else. One that kills it later, while others run, charges those that really started.
        """
        self.alone = None
        self.start_later()

    def start_later(self) -> None:
        """Start more of the queue in a loop callback of its own, so that slots freed in the
        same loop iteration share one group (one commit), and other callbacks interleave."""
        if self._table.queued and not self._start_soon and not self.closing:
            self._start_soon = True
            assert self._loop is not None
            self._loop.call_soon(self.start_queued)

    # ------------------------------------------------------------------ committed groups
    def _attempts_committed(
        self, future: asyncio.Future[Claims | None], inline: list[Timer], pooled: list[Timer]
    ) -> None:
        self._attempt_commits -= 1
        if future.cancelled() or future.exception() is not None:
            self._attempts_failed(future, inline, pooled)
            return
        claims: Claims | None = future.result()
        if claims is not None:  # a store that may refuse attempts (PostgreSQL): see storage
            inline, pooled = self._claimed(claims, inline, pooled)
        if self.closing:  # not run: they fire again after the next start
            self._inline_starting = False
            self.alone = None
            self.running -= len(inline) + len(pooled)
            self._slots -= len(pooled)
            self.check_idle()
            return
        self._run_batch(inline, pooled)
        if not inline and not self._attempt_commits:
            self.start_later()  # a crash suspect may be waiting for no commit in flight

    def _claimed(
        self, claims: Claims, inline: list[Timer], pooled: list[Timer]
    ) -> tuple[list[Timer], list[Timer]]:
        """Only the attempts ``claims`` claimed run; the others leave the group's counts."""
        kept_inline = [timer for timer in inline if claims.undo_unless_claimed(timer)]
        kept_pooled = [timer for timer in pooled if claims.undo_unless_claimed(timer)]
        self.limits.release_refused(itertools.chain(inline, pooled), kept_inline, kept_pooled)
        self.running -= len(inline) - len(kept_inline) + len(pooled) - len(kept_pooled)
        self._slots -= len(pooled) - len(kept_pooled)
        if inline and not kept_inline:  # the inline group ended before it began
            self._inline_starting = False
            self.start_later()
        return kept_inline, kept_pooled

    def _attempts_failed(
        self, future: asyncio.Future[Any], inline: list[Timer], pooled: list[Timer]
    ) -> None:
        """The group's attempt commit failed: its timers go back into the wheel, uncharged."""
        error = "cancelled" if future.cancelled() else future.exception()
        log_attempts_failure(
            inline or pooled, len(inline) + len(pooled), error, JOURNAL_RETRY_DELAY
        )
        self._inline_starting = False
        self.alone = None
        self._slots -= len(pooled)
        retry_at = self._clock.time() + JOURNAL_RETRY_DELAY
        timers = self._table.timers
        for timer in itertools.chain(inline, pooled):
            self.running -= 1
            self.limits.release(timer)
            if timer.state is RUNNING and timers.get(timer.key) is timer:
                timer.uncharge()
                timer.due = max(timer.due, retry_at)
                self._table.insert(timer)
        self.check_idle()
        self._arm()

    def _run_batch(self, inline: list[Timer], pooled: list[Timer]) -> None:
        """A group's attempts are committed: run the plain ones now, hand the rest to workers."""
        self.running -= len(inline)
        run_plain_group(
            inline, self._handlers, self._outcomes, self._stats, self._events, self._clock
        )
        self.limits.release_all(inline)
        if inline:
            self._inline_starting = False
            self.alone = None
            if self._instant:
                self.start_later()  # the next group in a callback of its own: others interleave
            else:
                self.start_queued()  # its attempts join this group's acks in one commit
        if pooled:
            self.pool.run(pooled)
        self.check_idle()

    # ------------------------------------------------------------------ the pool's side
    def attempt_ended(self, timer: Timer) -> None:
        """``timer``'s attempt ended: in memory the queue's head takes its slot, else one group."""
        self.running -= 1
        self._slots -= 1
        self.limits.release(timer)
        if not self._table.queued or self.closing:  # closing: queued ones wait for next start
            return
        if not self._instant:
            self.start_later()
        elif not self._hand_over_head():
            self.start_queued()

    def _hand_over_head(self) -> bool:
        """In memory: give the queue's head to the worker whose slot just freed, if it is one
        for a worker (a plain one at the head starts a new inline group instead)."""
        ready = self._ready
        while ready and ready[0].where != QUEUED:  # cancelled or replaced while it waited
            ready.popleft()
        if not ready:
            return False
        spec = self._handlers[ready[0].handler]
        if spec.inline or (self.admit is not None and not self.admit(ready[0], spec)):
            return False
        timer = ready.popleft()
        timer.charge(self._clock.time())
        self._table.queued -= 1
        self.running += 1
        self._slots += 1
        self.pool.hand(timer)  # the worker whose slot freed takes it next
        return True

    def drop_unstarted(self) -> None:
        """close(): attempts committed but not started are not run (they are charged, and run
        again after the next start); queued timers stay PENDING, never charged."""
        dropped = self.pool.drop_waiting()
        self.running -= dropped
        self._slots -= dropped
        self.check_idle()

    def check_idle(self) -> None:
        if self.running == 0:
            self.idle.set()
