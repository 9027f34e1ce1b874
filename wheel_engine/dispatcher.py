"""How timers fire: the wheel, the one armed clock callback, the workers and the outcomes.

:class:`Dispatcher` is the half of the engine that users never call. It owns the engine's state
(timers by key, the wheel, the queue) and everything that happens between "this timer is
pending" and "its attempt ended": arming exactly one clock callback for the earliest due tick
(none when idle), taking due timers out of the wheel in (tick, version) order into a queue,
starting from it what can start now as one group whose attempts are committed together just
before their handlers start (never for a timer still queued), running plain handlers inline
like ``call_at`` callbacks and the others on at most ``max_concurrency`` worker tasks, and
turning each attempt's end into SUCCEEDED, CANCELED, a retry or DEAD.
:class:`wheel_engine.engine.Engine` adds the public API (schedule, cancel, recovery, shutdown)
on top.

Everything here runs on the loop thread: a decision and the state change it leads to happen in
one synchronous step, so there are no locks.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import math
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from journal import Ack, Attempt, Cancel, Dead, Record, Retry
from journal.errors import JournalError
from wheel_engine import diagnostics
from wheel_engine.clock import Cancellable, Clock
from wheel_engine.errors import PermanentError
from wheel_engine.handlers import HandlerSpec
from wheel_engine.journaling import submit_safely
from wheel_engine.model import Firing, TimerState
from wheel_engine.stats import Counters
from wheel_engine.timer import (
    INTERRUPT_CANCEL,
    INTERRUPT_CRASH,
    INTERRUPT_TIMEOUT,
    QUEUED,
    UNDECODED,
    Timer,
    Worker,
)
from wheel_engine.wheel import TimingWheel
from wheel_engine.wheel.entry import DETACHED

if TYPE_CHECKING:
    from journal import Journal

logger = logging.getLogger(__name__)

PENDING = TimerState.PENDING
RUNNING = TimerState.RUNNING
SUCCEEDED = TimerState.SUCCEEDED
CANCELED = TimerState.CANCELED
DEAD = TimerState.DEAD

INLINE_BATCH = 1024  # inline handlers run per loop callback before yielding to other work
WORKER_YIELD_EVERY = 256  # a worker yields to the loop after this many back-to-back firings
JOURNAL_RETRY_DELAY = 1.0  # seconds before re-dispatching a batch whose attempt commit failed

_new_tuple = tuple.__new__


class Dispatcher:
    """The firing half of the engine; see the module docstring. Not used on its own."""

    def __init__(
        self,
        *,
        tick: float,
        max_concurrency: int,
        clock: Clock,
        retention: float,
        max_retained: int,
        clock_check: float | None,
        max_error_bytes: int = diagnostics.DEFAULT_MAX_ERROR_BYTES,
    ) -> None:
        self.tick = tick
        self.max_concurrency = max_concurrency
        self.clock = clock
        self.retention = retention
        self.max_retained = max_retained
        self.clock_check = clock_check
        self.max_error_bytes = max_error_bytes
        self.journal: Journal | None = None

        self._handlers: dict[str, HandlerSpec] = {}
        self._timers: dict[str, Timer] = {}  # key -> its latest version, live or finished
        # SUCCEEDED and CANCELED timers in finishing order, for retention. An OrderedDict: a
        # dict would make forgetting from the front O(n) per call (iteration skips the holes).
        self._finished: OrderedDict[str, Timer] = OrderedDict()
        self._dead: dict[str, Timer] = {}  # DEAD timers: kept until redriven or replaced
        self._unhandled: dict[str, dict[str, Timer]] = {}  # handler name -> parked due timers
        self._wheel: TimingWheel[Timer] = TimingWheel(0)
        self._ready: deque[Timer] = deque()  # due, not started, not charged: waiting to start
        self._queued = 0  # timers in _ready still QUEUED (a cancelled one leaves a stale entry)
        self._go: deque[Timer] = deque()  # attempt committed, waiting for a worker task
        self._slots = 0  # worker slots taken: attempts committing for, or running on, a worker
        self._inline_starting = False  # a group of plain handlers is committing or running
        self._start_soon = False  # a _start_queued callback is scheduled
        self._attempt_commits = 0  # groups whose attempts are being committed
        self._alone: Timer | None = None  # a crash suspect starting alone (see _suspect_started)
        self._workers: set[asyncio.Task[None]] = set()
        self._threads: set[asyncio.Future[Any]] = set()
        self._running = 0  # attempts started (or committing) and not yet ended
        self._hook_failed: set[str] = set()  # handlers whose describe_error raised (logged)
        self._armed: Cancellable | None = None
        self._armed_tick: int | None = None
        self._stats = Counters()
        self._started = False
        self._closing = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._idle: asyncio.Event | None = None  # set while no attempt is running
        self._staging = False  # an idle-time staging callback is queued

    def _maybe_compact(self) -> None:
        """Called after journal writes; the engine compacts when history outgrows the timers."""

    # ------------------------------------------------------------------ the wheel
    def _tick_floor(self, when: float) -> int:
        return math.floor(when / self.tick)

    def _insert(self, timer: Timer) -> None:
        """Into the wheel at its due tick, rounded up: a tick is never before the due time."""
        timer.tick = math.ceil(timer.due / self.tick)
        timer.seq = timer.version
        self._wheel.insert_entry(timer)

    def _place(self, timer: Timer) -> None:
        """A pending timer goes into the wheel, or is parked if its handler is unknown."""
        if timer.handler in self._handlers:
            self._insert(timer)
        else:
            self._park(timer)

    def _park(self, timer: Timer) -> None:
        self._unhandled.setdefault(timer.handler, {})[timer.key] = timer

    def _unplace(self, timer: Timer) -> None:
        """Take a pending timer out of the wheel, the queue or the parking lot."""
        if timer.where == QUEUED:  # its queue entry goes stale: _take skips it
            timer.where = DETACHED
            self._queued -= 1
        elif timer.where != DETACHED:
            self._wheel.remove(timer)
        else:
            parked = self._unhandled.get(timer.handler)
            if parked is not None and parked.pop(timer.key, None) is not None and not parked:
                del self._unhandled[timer.handler]

    def _arm(self) -> None:
        """Keep exactly one clock callback, for the earliest due tick (none when idle)."""
        if self._closing or not self._started:
            return
        wheel = self._wheel
        next_tick = wheel.next_tick()
        if next_tick is not None:
            # The wheel stages a coming slot's cascade a budget at a time inside advance();
            # when the slot before it is empty it asks to be advanced early, so the cascade is
            # not all done at the crossing (a stall of up to a second with a million timers).
            work_tick = wheel.next_work_tick()
            if work_tick is not None and work_tick < next_tick:
                next_tick = work_tick
        if next_tick == self._armed_tick and self._armed is not None:
            return
        self._disarm()
        if next_tick is None:
            return
        when = next_tick * self.tick
        if self.clock_check is not None:
            # A wall clock set forward is noticed within clock_check seconds.
            when = min(when, self.clock.time() + self.clock_check)
        self._armed_tick = next_tick
        self._armed = self.clock.call_at(when, self._on_tick)

    def _disarm(self) -> None:
        if self._armed is not None:
            self._armed.cancel()
        self._armed = None
        self._armed_tick = None

    def _on_tick(self) -> None:
        """The armed callback: take every timer due by the wall clock and dispatch it."""
        self._armed = None
        self._armed_tick = None
        if self._closing:
            return
        now = self.clock.time()
        batch = self._wheel.advance(self._tick_floor(now))
        if batch:
            self._dispatch(batch, now)
        self._purge_finished(now)
        self._arm()
        if not self._staging and self._wheel.work(0):
            self._staging = True
            self._loop_call_soon(self._stage)

    def _stage(self) -> None:
        """Idle-time cascade staging, a budget per loop callback, so other callbacks interleave."""
        if not self._closing and self._wheel.work():
            self._loop_call_soon(self._stage)
        else:
            self._staging = False
            self._arm()

    def _loop_call_soon(self, callback: Callable[[], None]) -> None:
        assert self._loop is not None
        self._loop.call_soon(callback)

    def _dispatch(self, batch: list[Timer], now: float) -> None:
        """Due timers join the queue, in (tick, version) order; nothing is charged yet."""
        handlers = self._handlers
        ready = self._ready
        queued = 0
        for timer in batch:
            if timer.due > now:  # float rounding of the tick: never early, try next tick
                self._insert(timer)
                continue
            spec = handlers.get(timer.handler)
            if spec is None:
                self._park(timer)
                continue
            if timer.attempts >= spec.retry.max_attempts:
                # Recovered after its last allowed attempt was interrupted by a crash: that
                # attempt failed, and it was the last one. (Normal retries never get here.)
                self._give_up(timer, f"attempt {timer.attempts} was interrupted", now)
                continue
            timer.where = QUEUED
            ready.append(timer)
            queued += 1
        if queued:
            self._queued += queued
            self._start_queued()

    # ------------------------------------------------------------------ starting attempts
    def _start_queued(self) -> None:
        """Take from the head of the queue what can start now and commit those attempts.

        A group is up to INLINE_BATCH plain handlers (run on the loop, one group in flight at a
        time) followed by as many others as there are free worker slots. Its attempts are
        committed in one journal write, and the handlers start once it is committed: a timer
        still queued is never charged (SPEC guarantee 5). The queue's order is kept: the first
        timer that cannot start stops the group.
        """
        self._start_soon = False
        if self._closing:
            return
        inline, pooled = self._take()
        if not inline and not pooled:
            return
        assert self._idle is not None
        self._idle.clear()
        if self.journal is None:
            self._run_batch(inline, pooled)
            return
        self._attempt_commits += 1
        now = self.clock.time()
        new = _new_tuple
        records: list[Record] = [
            new(Attempt, (timer.key, timer.version, timer.attempts, now))
            for timer in itertools.chain(inline, pooled)
        ]
        committed = submit_safely(self.journal, records)
        committed.add_done_callback(lambda future: self._attempts_committed(future, inline, pooled))

    def _take(self) -> tuple[list[Timer], list[Timer]]:
        """Pop the next group off the queue: (plain ones to run inline, ones for the workers)."""
        ready = self._ready
        handlers = self._handlers
        inline: list[Timer] = []
        pooled: list[Timer] = []
        if self._alone is not None:
            return inline, pooled
        inline_room = 0 if self._inline_starting else INLINE_BATCH
        free = self.max_concurrency - self._slots
        now = self.clock.time()
        while ready:
            timer = ready[0]
            if timer.where != QUEUED:  # cancelled or replaced while it waited
                ready.popleft()
                continue
            spec = handlers[timer.handler]
            if timer.interrupt == INTERRUPT_CRASH:  # a suspect: it starts alone
                if inline or pooled or self._attempt_commits or self._inline_starting:
                    break  # once everything before it has committed and started
                if not spec.inline and not free:
                    break
                ready.popleft()
                self._charge(timer, now)
                (inline if spec.inline else pooled).append(timer)
                self._alone = timer
                break
            if not pooled and spec.inline:
                if not inline_room:
                    break  # it starts with the next group, once this (or the last) one ran
                inline_room -= 1
                inline.append(timer)
            elif free:
                free -= 1
                pooled.append(timer)
            else:
                break
            ready.popleft()
            self._charge(timer, now)
        taken = len(inline) + len(pooled)
        self._queued -= taken
        self._running += taken
        self._slots += len(pooled)
        if inline:
            self._inline_starting = True
        return inline, pooled

    def _suspect_started(self) -> None:
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
        self._alone = None
        self._start_later()

    @staticmethod
    def _charge(timer: Timer, now: float) -> None:
        """Out of the queue and RUNNING, one attempt more (its record is committed next)."""
        timer.interrupt = None  # INTERRUPT_CRASH has done its work
        timer.where = DETACHED
        timer.state = RUNNING
        timer.attempts += 1
        if timer.first_attempt_at is None:
            timer.first_attempt_at = now
        timer.updated_at = now

    def _start_later(self) -> None:
        """Start more of the queue in a loop callback of its own, so that slots freed in the
        same loop iteration share one group (one commit), and other callbacks interleave."""
        if self._queued and not self._start_soon and not self._closing:
            self._start_soon = True
            self._loop_call_soon(self._start_queued)

    def _attempts_committed(
        self, future: asyncio.Future[None], inline: list[Timer], pooled: list[Timer]
    ) -> None:
        self._attempt_commits -= 1
        if future.cancelled() or future.exception() is not None:
            first = (inline or pooled)[0]
            logger.warning(  # one line for the group: its first timer, never a payload
                "could not commit %d attempt(s) (timer %s, version %d, attempt %d, ...): %s; "
                "they start again in %.0f s",
                len(inline) + len(pooled),
                first.key,
                first.version,
                first.attempts,
                "cancelled" if future.cancelled() else future.exception(),
                JOURNAL_RETRY_DELAY,
            )
            self._inline_starting = False
            self._alone = None
            self._slots -= len(pooled)
            retry_at = self.clock.time() + JOURNAL_RETRY_DELAY
            for timer in itertools.chain(inline, pooled):
                self._running -= 1
                if timer.state is RUNNING and self._timers.get(timer.key) is timer:
                    timer.state = PENDING
                    timer.attempts -= 1
                    timer.due = max(timer.due, retry_at)
                    self._insert(timer)
            self._check_idle()
            self._arm()
            return
        if self._closing:  # not run: they fire again after the next start
            self._inline_starting = False
            self._alone = None
            self._running -= len(inline) + len(pooled)
            self._slots -= len(pooled)
            self._check_idle()
            return
        self._run_batch(inline, pooled)
        if not inline and not self._attempt_commits:
            self._start_later()  # a crash suspect may be waiting for no commit in flight

    def _run_batch(self, inline: list[Timer], pooled: list[Timer]) -> None:
        """A group's attempts are committed: run the plain ones now, hand the rest to workers."""
        now = self.clock.time()
        succeeded: list[Timer] = []
        handlers = self._handlers
        for timer in inline:
            self._running -= 1
            if timer.interrupt == INTERRUPT_CANCEL:  # cancelled while its attempt committed
                self._complete(timer, asyncio.CancelledError(), cancelled=True)
                continue
            try:
                handlers[timer.handler].fn(self._firing(timer, now))
            except Exception as exc:
                self._complete(timer, exc)
                continue
            succeeded.append(timer)
        if succeeded:
            self._succeed(succeeded, now)
        if inline:
            self._inline_starting = False
            self._alone = None
            if self.journal is None:
                self._start_later()  # the next group in a callback of its own: others interleave
            else:
                self._start_queued()  # its attempts join this group's acks in one commit
        if pooled:
            self._go.extend(pooled)
            self._start_workers()
        self._check_idle()

    def _firing(self, timer: Timer, now: float) -> Firing:
        lag = now - timer.due
        stats = self._stats
        stats.fired += 1
        stats.lags.append(lag)
        if lag > stats.lag_max:
            stats.lag_max = lag
        payload = timer.payload
        if payload is UNDECODED:
            payload = timer.decode_payload()
        return _new_tuple(  # NamedTuple's own __new__ is a Python function: skip it
            Firing,
            (timer.key, timer.version, timer.handler, payload, timer.due, timer.attempts, now),
        )

    def _succeed(self, timers: list[Timer], now: float) -> None:
        """Handlers returned normally: SUCCEEDED, with one batch of acks for the journal."""
        self._stats.succeeded += len(timers)
        current = self._timers
        finished = self._finished
        for timer in timers:
            timer.interrupt = None
            if current.get(timer.key) is timer:  # not replaced while it ran
                timer.state = SUCCEEDED
                timer.updated_at = now
                finished[timer.key] = timer
        self._purge_finished(now)
        if self.journal is not None:
            self._journal_write([Ack(timer.key, timer.version, now) for timer in timers])

    def _drop_unstarted(self) -> None:
        """close(): attempts committed but not started are not run (they are charged, and run
        again after the next start); queued timers stay PENDING, never charged."""
        self._running -= len(self._go)
        self._slots -= len(self._go)
        self._go.clear()
        self._check_idle()

    # ------------------------------------------------------------------ workers
    def _start_workers(self) -> None:
        wanted = min(self.max_concurrency - len(self._workers), len(self._go))
        for _ in range(wanted):
            task = asyncio.ensure_future(self._worker())
            self._workers.add(task)
            task.add_done_callback(self._workers.discard)

    async def _worker(self) -> None:
        """Run committed attempts. One task serves many firings; it ends when none is left.

        The attempt is run in this loop itself, not in a coroutine of its own: one coroutine
        object less per firing (measured: 1 us of 3 per no-op async firing in memory).
        Shutdown's cancellation propagates: that attempt is not acknowledged.
        """
        task = asyncio.current_task()
        assert task is not None
        worker = Worker(task)
        go = self._go
        handlers = self._handlers
        clock = self.clock
        served = 0
        while go and not self._closing:
            timer = go.popleft()
            if self._alone is timer:  # the queue goes on once its first step has run
                self._loop_call_soon(self._suspect_started)
            if timer.interrupt == INTERRUPT_CANCEL:  # cancelled before its handler started
                self._running -= 1
                self._free_slot()
                self._complete(timer, asyncio.CancelledError(), cancelled=True)
                continue
            spec = handlers[timer.handler]
            error: BaseException | None = None
            timeout = None
            if spec.timeout is not None:
                timeout = clock.call_at(
                    clock.time() + spec.timeout,
                    functools.partial(self._interrupt, timer, INTERRUPT_TIMEOUT),
                )
            try:
                firing = worker.firing = self._firing(timer, clock.time())
                timer.worker = worker
                if spec.is_async:
                    await spec.fn(firing)
                elif spec.thread:
                    await self._in_thread(spec, firing)
                else:
                    spec.fn(firing)
            except asyncio.CancelledError as exc:
                if timer.interrupt is None:  # the engine is closing: not acknowledged
                    timer.worker = None
                    self._running -= 1
                    self._free_slot()
                    self._check_idle()
                    raise
                error = exc
            except Exception as exc:
                error = exc
            finally:
                worker.firing = None
                if timeout is not None:
                    timeout.cancel()
            timer.worker = None
            if timer.interrupt is not None and task.cancelling():
                task.uncancel()
            self._running -= 1
            self._free_slot()
            self._complete(timer, error, cancelled=timer.interrupt == INTERRUPT_CANCEL)
            served += 1
            if served % WORKER_YIELD_EVERY == 0:
                await asyncio.sleep(0)
        self._check_idle()

    def _free_slot(self) -> None:
        """A worker's attempt ended. In memory it goes on with the queue's head at once (nothing
        to commit); with a journal the freed slots are filled by one group, a callback later."""
        self._slots -= 1
        if not self._queued or self._closing:  # closing: queued timers wait for the next start
            return
        if self.journal is not None:
            self._start_later()
        elif not self._hand_over_head():
            self._start_queued()

    def _hand_over_head(self) -> bool:
        """In memory: give the queue's head to the worker whose slot just freed, if it is one
        for a worker (a plain one at the head starts a new inline group instead)."""
        ready = self._ready
        while ready and ready[0].where != QUEUED:  # cancelled or replaced while it waited
            ready.popleft()
        if not ready or self._handlers[ready[0].handler].inline:
            return False
        timer = ready.popleft()
        self._charge(timer, self.clock.time())
        self._queued -= 1
        self._running += 1
        self._slots += 1
        self._go.append(timer)
        return True

    async def _in_thread(self, spec: HandlerSpec, firing: Firing) -> None:
        assert self._loop is not None
        future = self._loop.run_in_executor(None, spec.fn, firing)
        self._threads.add(future)
        future.add_done_callback(self._threads.discard)
        try:
            await future
        except asyncio.CancelledError:
            firing._request_stop()  # we stop waiting; the thread runs on and can see it
            raise

    def _interrupt(self, timer: Timer, reason: str) -> None:
        """Ask a RUNNING attempt to stop (a cancel, or its timeout).

        Its firing's ``cancel_requested`` turns true and an async handler's task is cancelled.
        A thread cannot be interrupted: a cancelled thread handler is waited for and ends as it
        ends (SUCCEEDED if it returns), unless its timeout then stops the wait. An attempt not
        started yet (committing, or waiting for a worker) is not started.
        """
        if timer.state is not RUNNING:
            return
        first = timer.interrupt is None
        if first:
            timer.interrupt = reason
        worker = timer.worker
        if worker is None or worker.firing is None:
            return
        if first:
            worker.firing._request_stop()
        if self._handlers[timer.handler].thread:
            if reason == INTERRUPT_TIMEOUT:
                worker.task.cancel()  # stop waiting for it; the thread runs on
        elif first:
            worker.task.cancel()

    def _check_idle(self) -> None:
        if self._running == 0 and self._idle is not None:
            self._idle.set()

    # ------------------------------------------------------------------ outcomes
    def _complete(self, timer: Timer, error: BaseException | None, cancelled: bool = False) -> None:
        """Record how an attempt ended: success, cancel, retry or dead.

        ``error`` is None only when the handler returned normally: that is a success even if a
        cancel was requested meanwhile (the work was done). A cancelled attempt that raised
        anything is CANCELED: it stopped, as it was asked to.
        """
        interrupt = timer.interrupt
        timer.interrupt = None
        current = self._timers.get(timer.key) is timer
        now = self.clock.time()
        if error is None:
            self._succeed([timer], now)
            return
        if cancelled:
            self._stats.canceled += 1
            self._journal_write([Cancel(timer.key, timer.version, now)])
            if current:
                self._finish(timer, CANCELED, now)
            return
        spec = self._handlers.get(timer.handler)
        if interrupt == INTERRUPT_TIMEOUT and spec is not None:
            message = f"timed out after {spec.timeout} s"
        else:
            message = diagnostics.describe(
                error,
                spec.describe_error if spec is not None else None,
                self.max_error_bytes,
                handler=timer.handler,
                failed_hooks=self._hook_failed,
            )
            if logger.isEnabledFor(logging.DEBUG):  # tracebacks can carry data: opt-in only
                logger.debug(
                    "handler %r failed: timer %s (version %d, attempt %d)",
                    timer.handler,
                    timer.key,
                    timer.version,
                    timer.attempts,
                    exc_info=error,
                )
        timer.last_error = message
        delay = None
        if spec is not None and not isinstance(error, PermanentError):
            first = timer.first_attempt_at if timer.first_attempt_at is not None else now
            delay = spec.retry.next_delay(timer.attempts, first_attempt_at=first, now=now)
        if delay is None:
            self._give_up(timer, message, now, current)
            return
        self._stats.retried += 1
        due = now + delay
        self._journal_write([Retry(timer.key, timer.version, timer.attempts, message, due, now)])
        if current:
            timer.state = PENDING
            timer.due = due
            timer.updated_at = now
            self._place(timer)
            self._arm()

    def _give_up(self, timer: Timer, message: str, now: float, current: bool = True) -> None:
        timer.last_error = message
        self._stats.dead += 1
        self._journal_write([Dead(timer.key, timer.version, timer.attempts, message, now)])
        if current:
            self._finish(timer, DEAD, now)
            self._dead[timer.key] = timer
        logger.warning(  # the bounded text, never the payload
            "timer %s (version %d) is DEAD after %d attempt(s): %s",
            timer.key,
            timer.version,
            timer.attempts,
            diagnostics.one_line(message),
        )

    def _finish(self, timer: Timer, state: TimerState, now: float | None = None) -> None:
        """``timer`` ends in ``state``. SUCCEEDED and CANCELED ones enter the retention window
        (which forgets the oldest at once if it is full); DEAD ones are kept in ``_dead``."""
        timer.state = state
        timer.updated_at = self.clock.time() if now is None else now
        if state is not DEAD:
            self._finished[timer.key] = timer
            self._purge_finished(timer.updated_at)

    def _journal_write(self, records: list[Record]) -> None:
        """Outcome records are batched, not awaited: a lost ack only means firing again.

        A failed write is one WARNING line naming the timers, never their payloads."""
        if self.journal is None:
            return
        future = submit_safely(self.journal, records)  # never raises: a bad record never stalls
        future.add_done_callback(functools.partial(diagnostics.logged_write, records))
        self._maybe_compact()

    def _purge_finished(self, now: float) -> None:
        """Forget finished timers older than ``retention`` and the oldest beyond ``max_retained``.

        Called whenever timers finish and on every tick, so the window holds whatever the churn:
        O(1) when nothing is to be forgotten, O(1) per timer forgotten. DEAD timers are not in
        the window: they stay until redriven or replaced.
        """
        finished = self._finished
        if not finished:
            return
        horizon = now - self.retention
        excess = len(finished) - self.max_retained
        timers = self._timers
        while finished:
            key = next(iter(finished))
            timer = finished[key]
            if excess <= 0 and timer.updated_at > horizon:
                return
            del finished[key]
            excess -= 1
            if timers.get(key) is timer:
                del timers[key]


def log_failure(future: asyncio.Future[Any]) -> None:
    """Done-callback for work nobody awaits: a failed journal write is a warning, not lost."""
    if future.cancelled():
        return
    error = future.exception()
    if error is not None:
        if isinstance(error, JournalError):
            logger.warning("journal write failed: %s", error)
        else:
            logger.error("background work failed", exc_info=error)
