"""How timers fire: the wheel, the one armed clock callback, the workers and the outcomes.

:class:`Dispatcher` is the half of the engine that users never call. It owns the engine's state
(timers by key, the wheel, the ready queue) and everything that happens between "this timer is
pending" and "its attempt ended": arming exactly one clock callback for the earliest due tick
(none when idle), taking due timers out of the wheel in (tick, version) order, committing their
attempts before their handlers run, running plain handlers inline like ``call_at`` callbacks and
async ones on at most ``max_concurrency`` worker tasks, and turning each attempt's end into
SUCCEEDED, CANCELED, a retry or DEAD. :class:`wheel_engine.engine.Engine` adds the public API
(schedule, cancel, recovery, shutdown) on top.

Everything here runs on the loop thread: a decision and the state change it leads to happen in
one synchronous step, so there are no locks.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from journal import Ack, Attempt, Cancel, Dead, Record, Retry
from journal.errors import JournalError
from wheel_engine.clock import Cancellable, Clock
from wheel_engine.errors import PermanentError
from wheel_engine.handlers import HandlerSpec
from wheel_engine.journaling import submit_safely
from wheel_engine.model import Firing, TimerState
from wheel_engine.stats import Counters
from wheel_engine.timer import INTERRUPT_CANCEL, INTERRUPT_TIMEOUT, UNDECODED, Timer
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
    ) -> None:
        self.tick = tick
        self.max_concurrency = max_concurrency
        self.clock = clock
        self.retention = retention
        self.max_retained = max_retained
        self.clock_check = clock_check
        self.journal: Journal | None = None

        self._handlers: dict[str, HandlerSpec] = {}
        self._timers: dict[str, Timer] = {}  # key -> its latest version, live or finished
        # SUCCEEDED and CANCELED timers in finishing order, for retention. An OrderedDict: a
        # dict would make forgetting from the front O(n) per call (iteration skips the holes).
        self._finished: OrderedDict[str, Timer] = OrderedDict()
        self._dead: dict[str, Timer] = {}  # DEAD timers: kept until redriven or replaced
        self._unhandled: dict[str, dict[str, Timer]] = {}  # handler name -> parked due timers
        self._wheel: TimingWheel[Timer] = TimingWheel(0)
        self._ready: deque[Timer] = deque()  # attempt committed, waiting for a worker
        self._workers: set[asyncio.Task[None]] = set()
        self._threads: set[asyncio.Future[Any]] = set()
        self._running = 0  # attempts started (or committing) and not yet ended
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
        """Take a pending timer out of the wheel or the parking lot."""
        if timer.where != DETACHED:
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
        handlers = self._handlers
        runnable = []
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
            timer.state = RUNNING
            timer.attempts += 1
            if timer.first_attempt_at is None:
                timer.first_attempt_at = now
            timer.updated_at = now
            runnable.append(timer)
        if not runnable:
            return
        self._running += len(runnable)
        assert self._idle is not None
        self._idle.clear()
        if self.journal is None:
            self._run_batch(runnable)
            return
        # Attempts are committed before their handlers run, so a handler that kills the
        # process counts as an attempt and cannot crash-loop forever.
        records: list[Record] = [
            Attempt(timer.key, timer.version, timer.attempts, now) for timer in runnable
        ]
        committed = submit_safely(self.journal, records)
        committed.add_done_callback(lambda future: self._attempts_committed(future, runnable))

    def _attempts_committed(self, future: asyncio.Future[None], batch: list[Timer]) -> None:
        if future.cancelled() or future.exception() is not None:
            error = future.exception() if not future.cancelled() else "cancelled"
            logger.warning("could not commit %d attempts (%s); retrying them", len(batch), error)
            retry_at = self.clock.time() + JOURNAL_RETRY_DELAY
            for timer in batch:
                self._running -= 1
                if timer.state is RUNNING and self._timers.get(timer.key) is timer:
                    timer.state = PENDING
                    timer.attempts -= 1
                    timer.due = max(timer.due, retry_at)
                    self._insert(timer)
            self._check_idle()
            self._arm()
            return
        if self._closing:
            self._running -= len(batch)  # not run: they fire again after the next start
            self._check_idle()
            return
        self._run_batch(batch)

    def _run_batch(self, batch: list[Timer]) -> None:
        """Run plain handlers inline (up to INLINE_BATCH) and queue the rest for the workers,
        keeping the batch's order: once one timer is queued, every later one is too."""
        handlers = self._handlers
        ready = self._ready
        now = self.clock.time()
        succeeded: list[Timer] = []
        inline = 0
        for timer in batch:
            if timer.interrupt == INTERRUPT_CANCEL:  # cancelled before its handler started
                self._running -= 1
                self._complete(timer, asyncio.CancelledError(), cancelled=True)
                continue
            spec = handlers[timer.handler]
            if spec.inline and inline < INLINE_BATCH and not ready:
                inline += 1
                self._running -= 1
                try:
                    spec.fn(self._firing(timer, now))
                except Exception as exc:
                    self._complete(timer, exc)
                    continue
                succeeded.append(timer)
            else:
                ready.append(timer)
        if succeeded:
            self._succeed(succeeded, now)
        if ready:
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

    # ------------------------------------------------------------------ workers
    def _start_workers(self) -> None:
        wanted = min(self.max_concurrency - len(self._workers), len(self._ready))
        for _ in range(wanted):
            task = asyncio.ensure_future(self._worker())
            self._workers.add(task)
            task.add_done_callback(self._workers.discard)

    async def _worker(self) -> None:
        """Drain the ready queue. One task serves many firings; it ends when the queue is empty."""
        task = asyncio.current_task()
        assert task is not None
        ready = self._ready
        handlers = self._handlers
        served = 0
        while ready and not self._closing:
            timer = ready.popleft()
            if timer.interrupt == INTERRUPT_CANCEL:  # cancelled before its handler started
                self._running -= 1
                self._complete(timer, asyncio.CancelledError(), cancelled=True)
                continue
            spec = handlers[timer.handler]
            error: BaseException | None = None
            timeout = None
            timer.task = task
            if spec.timeout is not None:
                timeout = self.clock.call_at(
                    self.clock.time() + spec.timeout,
                    functools.partial(self._interrupt, timer, INTERRUPT_TIMEOUT),
                )
            try:
                firing = self._firing(timer, self.clock.time())
                if spec.is_async:
                    await spec.fn(firing)
                elif spec.thread:
                    await self._in_thread(spec, firing)
                else:
                    spec.fn(firing)
            except asyncio.CancelledError as exc:
                if timer.interrupt is None:  # the engine is closing: not acknowledged
                    timer.task = None
                    self._running -= 1
                    self._check_idle()
                    raise
                error = exc
            except Exception as exc:
                error = exc
            finally:
                if timeout is not None:
                    timeout.cancel()
            timer.task = None
            if timer.interrupt is not None and task.cancelling():
                task.uncancel()
            self._running -= 1
            self._complete(timer, error, cancelled=timer.interrupt == INTERRUPT_CANCEL)
            served += 1
            if served % WORKER_YIELD_EVERY == 0:
                await asyncio.sleep(0)
        self._check_idle()

    async def _in_thread(self, spec: HandlerSpec, firing: Firing) -> None:
        assert self._loop is not None
        future = self._loop.run_in_executor(None, spec.fn, firing)
        self._threads.add(future)
        future.add_done_callback(self._threads.discard)
        await future

    def _interrupt(self, timer: Timer, reason: str) -> None:
        if timer.state is RUNNING and timer.task is not None and timer.interrupt is None:
            timer.interrupt = reason
            timer.task.cancel()

    def _check_idle(self) -> None:
        if self._running == 0 and self._idle is not None:
            self._idle.set()

    # ------------------------------------------------------------------ outcomes
    def _complete(self, timer: Timer, error: BaseException | None, cancelled: bool = False) -> None:
        """Record how an attempt ended: success, cancel, retry or dead.

        ``error`` is None only when the handler returned normally: that is a success even if a
        cancel was requested meanwhile (the work was done).
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
        if interrupt == INTERRUPT_TIMEOUT:
            message = f"timed out after {self._handlers[timer.handler].timeout} s"
        else:
            message = f"{type(error).__name__}: {error}"
        timer.last_error = message
        spec = self._handlers.get(timer.handler)
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
        logger.warning(
            "timer %s (version %d) is DEAD after %d attempt(s): %s",
            timer.key,
            timer.version,
            timer.attempts,
            message,
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
        """Outcome records are batched, not awaited: a lost ack only means firing again."""
        if self.journal is None:
            return
        future = submit_safely(self.journal, records)
        future.add_done_callback(log_failure)
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
