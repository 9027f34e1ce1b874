"""The one runner of due timers: it owns the slots and runs every attempt, whichever way.

:class:`Dispatcher` takes the due timers the trigger hands it (:meth:`Dispatcher.enqueue`),
keeps them in its :class:`~wheel_engine.starting.StartQueue` until a group can start, has the
group's attempts committed (in parts: :mod:`.start_parts`), and runs each in one of three ways:

- **inline**: in memory with nobody listening and nothing queued, plain handlers (and async
  ones' first steps, :mod:`wheel_engine.eager`) run off the trigger's batch or the queue's
  head, each charged as it starts (:mod:`wheel_engine.inline`);
- **a plain group**: a committed group's plain handlers, one after another on the loop, their
  acks in one write (:mod:`wheel_engine.plain_group`);
- **a worker task**: async and thread handlers (and plain ones queued behind them) on at most
  ``max_concurrency`` worker tasks, each serving attempt after attempt (:meth:`_worker`).

Which way is decided before anything about the timer changes. Every way builds its handler's
argument with :func:`~wheel_engine.firing.firing_for` and records a success with
:meth:`~wheel_engine.outcomes.Outcomes.succeeded`; queued timers are taken (and charged) by
:meth:`StartQueue.take` alone. The slots are counted here and nowhere else: ``running``, the
worker slots taken, the one inline group under way; an attempt's end releases its slot here
(:meth:`_ended`) and starts more of the queue.

Where the sink's commits are done at once (``Commits.instant``, in memory: read once at
:meth:`Dispatcher.start`), a group's claim succeeds at once: it runs without an attempt commit,
and a freed worker slot takes the queue's head directly. Per-handler limits plug in at one
seam, :meth:`Limits.admit <wheel_engine.limits.Limits.admit>`, which the queue asks about each
timer it takes while a handler is limited. Everything runs on the loop thread: a
decision and the state change it leads to happen in one synchronous step, so there are no locks.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Any

from wheel_engine.clock import Clock
from wheel_engine.commits import Commits, log_attempts_failure
from wheel_engine.eager import EagerStarts, Started
from wheel_engine.events import EventBus
from wheel_engine.firing import firing_for
from wheel_engine.inline import InlineRunner
from wheel_engine.limits import Limits
from wheel_engine.outcomes import Outcomes
from wheel_engine.plain_group import run_plain_group
from wheel_engine.start_parts import split_group
from wheel_engine.starting import INLINE_BATCH, StartQueue
from wheel_engine.stats import Counters
from wheel_engine.storage import Claims
from wheel_engine.timer import INTERRUPT_CANCEL, Timer, Worker
from wheel_engine.timers import TimerTable
from wheel_engine.workers import WorkerPool, absorb_cancel, stale_cancel

JOURNAL_RETRY_DELAY = 1.0  # seconds before re-dispatching a batch whose attempt commit failed
WORKER_YIELD_EVERY = 256  # a worker yields to the loop after this many back-to-back firings


class Dispatcher:
    """The queue's groups, the slots and the three ways an attempt runs; see the module doc.

    ``running`` counts attempts taken (committing or running) and not yet ended; ``idle`` is
    set while it is zero. ``pool`` holds the worker tasks and reaches a running attempt;
    ``eager`` the host of async handlers' first steps. ``limits``: while a handler is limited,
    each due timer is admitted right before it is taken into a start group; one not admitted
    stays uncharged and ends the group there, and its gate calls :meth:`start_later` once it
    would admit again. While none is, the common case in memory runs inline (:meth:`_inline_now`).
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
        self.closing = False
        self._table = table
        self._handlers = table.handlers
        self._commits = commits
        self._stats = stats
        self._events = events
        self._clock = clock
        self._arm = arm
        self._max_concurrency = max_concurrency
        self._loop: asyncio.AbstractEventLoop | None = None
        self._slots = 0  # worker slots taken: attempts committing for, or running on, a worker
        self._inline_starting = False  # a plain part's plain handlers are committing or running
        self._start_soon = False  # a start_queued callback is scheduled
        self._attempt_commits = 0  # groups whose attempts are being committed
        self._instant = True  # the sink's commits are done at once: read at start()
        self._outcomes = outcomes = Outcomes(
            table, commits, stats, clock, events, arm=arm, max_error_bytes=max_error_bytes
        )
        self._ready: deque[Timer] = deque()
        self.limits = Limits(clock, events, self._ready, self)  # see the class doc
        self._queue = StartQueue(table, outcomes, clock, self._ready, self.limits)
        self.pool = pool = WorkerPool(table.handlers, self._worker, max_concurrency, clock)
        self.eager = EagerStarts(pool, self._worker, self._take_slot)
        self._runner = InlineRunner(table, outcomes, stats, events, self.eager)

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start taking due timers, the store open (its sink installed in the commits)."""
        self._loop = loop
        self._instant = self._commits.instant
        self.pool.start(loop)
        self.eager.start(loop, self._instant)

    # ------------------------------------------------------------------ taking groups
    def enqueue(self, batch: list[Timer], now: float) -> None:
        """Due timers, off the trigger in (tick, version) order, join the queue uncharged; the
        common case runs them at once instead (:meth:`_inline_now`)."""
        taken = 0
        if not self._ready and self._inline_now():
            self.running += 1  # the one plain handler running at a time
            room = self._slots < self._max_concurrency
            taken = self._runner.run_batch(batch, now, INLINE_BATCH, room)
            self.running -= 1
            if taken == len(batch):
                return
            if taken:
                batch = batch[taken:]
        if self._queue.route(batch, now):
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
            room = self._slots < self._max_concurrency  # for an eager step that might wait
            ran = self._runner.run_queue(self._ready, self._clock.time(), INLINE_BATCH, room)
            self.running -= 1
            if ran:
                self._table.purge_finished(self._clock.time())
                if ran == INLINE_BATCH:  # the rest in a callback of its own: others interleave
                    self.start_later()
                    return
        inline, pooled = self._take(
            self._max_concurrency - self._slots,
            0 if self._inline_starting else INLINE_BATCH,
            not self._attempt_commits and not self._inline_starting,
        )
        if not inline and not pooled:
            return
        self.idle.clear()
        cluster = self.limits.cluster  # PostgreSQL only: no other engine splits a group
        if not cluster:
            self._start_part(inline, pooled, True)
            return
        for part in split_group(inline, pooled, cluster):
            self._start_part(part.inline, part.pooled, part.plain)

    def _start_part(self, inline: list[Timer], pooled: list[Timer], plain: bool) -> None:
        """Commit a part of the group just taken (:mod:`wheel_engine.start_parts`) and run it
        once its own claim answers; where commits are done at once, run it now. Only the plain
        part's plain handlers are the inline group under way: no other part holds one back."""
        held = plain and bool(inline)  # it holds _inline_starting until its handlers ran
        if held:
            self._inline_starting = True
        if self._instant:  # the part's claim succeeds at once: no attempt records to write
            self._run_group(inline, pooled, held)
            return
        self._attempt_commits += 1
        committed = self._queue.submit_attempts(self._commits, inline, pooled)
        committed.add_done_callback(
            lambda future: self._attempts_committed(future, inline, pooled, held)
        )

    def _inline_now(self) -> bool:
        """True when plain handlers may run at once, off the general path (:mod:`.inline`): in
        memory, nobody subscribed to events, no crash suspect, no group under way."""
        return (
            self._instant
            and not self.closing
            and not self._events.active
            and not self.limits.gates
            and self._queue.alone is None
            and not self._inline_starting
        )

    def _take(
        self, free: int, inline_room: int, suspect_may_start: bool
    ) -> tuple[list[Timer], list[Timer]]:
        """The queue's next group (:meth:`StartQueue.take`), its slots taken."""
        inline, pooled = self._queue.take(free, inline_room, suspect_may_start)
        self.running += len(inline) + len(pooled)
        self._slots += len(pooled)
        return inline, pooled

    def _take_slot(self) -> None:
        """An eager attempt waits (:mod:`wheel_engine.eager`): it runs on a worker slot now."""
        self.running += 1
        self._slots += 1
        self.idle.clear()

    def suspect_started(self) -> None:
        """The crash suspect's handler has run its first step (up to its first await, or to
        its end): the queue goes on in groups (:mod:`wheel_engine.starting` says why)."""
        self._queue.alone = None
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
        self, future: asyncio.Future[Claims | None], inline: list[Timer], pooled: list[Timer],
        held: bool,
    ) -> None:  # fmt: skip
        """``held``: the part holds the inline group under way (``_inline_starting``)."""
        self._attempt_commits -= 1
        if future.cancelled() or future.exception() is not None:
            self._attempts_failed(future, inline, pooled, held)
            return
        claims: Claims | None = future.result()
        if claims is not None:  # a store that may refuse attempts (PostgreSQL): see storage
            kept_inline, kept_pooled = self._queue.claimed(claims, inline, pooled)
            self.running -= len(inline) - len(kept_inline) + len(pooled) - len(kept_pooled)
            self._slots -= len(pooled) - len(kept_pooled)
            if held and not kept_inline:  # the inline group ended before it began
                self._inline_starting = held = False
                self.start_later()
            inline, pooled = kept_inline, kept_pooled
        if self.closing:  # not run: they fire again after the next start
            self._not_run(inline, pooled, held)
            return
        self._run_group(inline, pooled, held)
        if not inline and not self._attempt_commits:
            self.start_later()  # a crash suspect may be waiting for no commit in flight

    def _attempts_failed(
        self, future: asyncio.Future[Any], inline: list[Timer], pooled: list[Timer], held: bool
    ) -> None:
        """The part's attempt commit failed: its timers go back into the wheel, uncharged."""
        error = "cancelled" if future.cancelled() else future.exception()
        timers = [*inline, *pooled]
        log_attempts_failure(timers, len(timers), error, JOURNAL_RETRY_DELAY)
        self._queue.give_back(timers, self._clock.time() + JOURNAL_RETRY_DELAY)
        self._not_run(inline, pooled, held)
        self._arm()

    def _not_run(self, inline: list[Timer], pooled: list[Timer], held: bool) -> None:
        """The part's attempts will not run here: their slots are free, its inline group ended."""
        if held:
            self._inline_starting = False
        self._queue.alone = None
        self._slots -= len(pooled)
        self.running -= len(inline) + len(pooled)
        self.check_idle()

    def _run_group(self, inline: list[Timer], pooled: list[Timer], held: bool) -> None:
        """A part's attempts are committed: run the plain ones now, hand the rest to workers."""
        self.running -= len(inline)
        if inline:
            run_plain_group(
                inline, self._handlers, self._outcomes, self._stats, self._events, self._clock
            )
            self.limits.release_all(inline)
            if held:
                self._inline_starting = False
            self._queue.alone = None
            if self._instant:
                self.start_later()  # the next group in a callback of its own: others interleave
            else:
                self.start_queued()  # its attempts join this group's acks in one commit
        if pooled:
            self.pool.hand(pooled)
        self.check_idle()

    # ------------------------------------------------------------------ worker tasks
    async def _worker(self, started: Started | None = None, throw: bool = False) -> None:
        """Run committed attempts. One task serves many firings; it ends when none is left.

        The attempt is run in this loop itself, not in a coroutine of its own: one coroutine
        object less per firing. Shutdown's cancellation propagates: that attempt is not
        acknowledged. ``started``: an eager attempt that waits, run first (its rest), this
        task its host (:mod:`wheel_engine.eager`); ``throw``: a cancel reached it meanwhile.
        """
        task = asyncio.current_task()
        assert task is not None and self._loop is not None
        worker = Worker(task) if started is None else started.worker
        pool, go, queue, handlers = self.pool, self.pool.go, self._queue, self._handlers
        clock, outcomes, stats, events = self._clock, self._outcomes, self._stats, self._events
        served = 0
        while started is not None or (go and not self.closing):
            error: BaseException | None = None
            firing = None
            if started is not None:  # its first step ran: its firing and timeout are set
                timer, spec, timeout = started.timer, started.spec, started.timeout
                firing = started.firing
                rest = started.rest(throw)
                started = None
            else:
                timer = go.popleft()
                if queue.alone is timer:  # the queue goes on once its first step has run
                    self._loop.call_soon(self.suspect_started)
                if timer.interrupt == INTERRUPT_CANCEL:  # cancelled before its handler started
                    self._ended(timer)
                    outcomes.complete(timer, asyncio.CancelledError(), cancelled=True)
                    continue
                guard = pool.start_guard  # the claim's lease may have lapsed while it waited
                if guard is not None and not guard(timer):
                    self._ended(timer)
                    continue
                spec = handlers[timer.handler]
                rest = None
                timeout = pool.timeout_for(timer, spec, clock.time())
            try:  # the attempt's span (tracing) wraps from here to outcomes.complete below
                if rest is not None:
                    await rest
                else:
                    firing = worker.firing = firing_for(timer, clock.time(), stats, events)
                    timer.worker = worker
                    if spec.is_async:
                        await spec.fn(firing)
                    elif spec.thread:
                        await pool.in_thread(spec, firing)
                    else:
                        spec.fn(firing)
            except asyncio.CancelledError as exc:
                # No interrupt, the task cancelled: the engine is closing (or the loop going
                # away), not acknowledged. Raised by the handler itself: a failed attempt.
                if timer.interrupt is None and (self.closing or task.cancelling()):
                    timer.worker = None
                    self._ended(timer)
                    self.check_idle()
                    raise
                error = exc
            except Exception as exc:
                error = exc
            finally:
                worker.firing = None
                if timeout is not None:
                    timeout.cancel()
            timer.worker = None
            stale = timer.interrupt is not None and task.cancelling() and stale_cancel(task)
            self._ended(timer)
            ran = None  # measured only for a subscriber: no clock read per firing otherwise
            if firing is not None and events.active:
                ran = clock.time() - firing.fired_at
            outcomes.complete(
                timer, error, cancelled=timer.interrupt == INTERRUPT_CANCEL, duration=ran
            )
            served += 1
            if stale:
                await absorb_cancel()
            elif served % WORKER_YIELD_EVERY == 0:
                await asyncio.sleep(0)
        self.check_idle()

    def _ended(self, timer: Timer) -> None:
        """``timer``'s attempt on a worker ended (or will not start): its slot is free. In
        memory the queue's head takes it, if it is one for a worker; else a group starts."""
        self.running -= 1
        self._slots -= 1
        self.limits.release(timer)
        if not self._table.queued or self.closing:  # closing: queued ones wait for next start
            return
        if not self._instant:
            self.start_later()
            return
        # A plain one at the head starts a new inline group instead (no inline room here).
        pooled = self._queue.take(1, 0, False)[1]
        if pooled:
            self.running += 1
            self._slots += 1
            self.pool.go.append(pooled[0])  # the worker whose slot freed takes it next
        else:
            self.start_queued()

    def drop_unstarted(self) -> None:
        """close(): attempts committed but not started are not run (they are charged, and run
        again after the next start); queued timers stay PENDING, never charged."""
        dropped = len(self.pool.go)
        self.pool.go.clear()
        self.running -= dropped
        self._slots -= dropped
        self.check_idle()

    def check_idle(self) -> None:
        if self.running == 0:
            self.idle.set()
