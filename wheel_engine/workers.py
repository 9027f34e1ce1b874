"""The worker tasks that run async and thread handlers, and how a running attempt is stopped.

At most ``max_concurrency`` worker tasks; each serves committed attempts from the pool's
waiting line until none is left (one task for many firings, not one task each). A handler's
timeout, a cancel and shutdown all reach a running attempt through :meth:`WorkerPool.interrupt`
or the task's cancellation. When an attempt ends, the pool tells the starter (a slot is free)
and the outcomes (what the attempt's end means for its timer).
"""

from __future__ import annotations

import asyncio
import functools
from collections import deque
from collections.abc import Callable
from typing import Any

from wheel_engine.clock import Clock
from wheel_engine.events import EventBus
from wheel_engine.handlers import HandlerSpec
from wheel_engine.model import Firing
from wheel_engine.outcomes import Outcomes
from wheel_engine.stats import Counters
from wheel_engine.timer import INTERRUPT_CANCEL, INTERRUPT_TIMEOUT, UNDECODED, Timer, Worker
from wheel_engine.timers import RUNNING

WORKER_YIELD_EVERY = 256  # a worker yields to the loop after this many back-to-back firings

_new_tuple = tuple.__new__


def firing_for(timer: Timer, now: float, stats: Counters, events: EventBus) -> Firing:
    """The :class:`~wheel_engine.model.Firing` a handler gets for the attempt starting now
    (and the firing counted, with its lateness, and emitted as ``fired``)."""
    stats.count_firing(now - timer.due)
    if events.active:
        events.fired(timer, now)
    payload = timer.payload
    if payload is UNDECODED:
        payload = timer.decode_payload()
    return _new_tuple(  # NamedTuple's own __new__ is a Python function: skip it
        Firing,
        (timer.key, timer.version, timer.handler, payload, timer.due, timer.attempts, now),
    )


class SlotOwner:
    """What the pool reports to about the attempts it runs: the starter, which owns the slots
    (:class:`wheel_engine.starting.Starter` subclasses this). A base class rather than an import
    of the starter: the pool sits below it, and compiled code calls these natively."""

    closing: bool  # shutting down: workers stop taking attempts
    alone: Timer | None  # the crash suspect starting alone, if any

    def suspect_started(self) -> None:
        """The crash suspect's handler has run its first step."""
        raise NotImplementedError

    def attempt_ended(self) -> None:
        """An attempt the pool ran ended: its slot is free."""
        raise NotImplementedError

    def check_idle(self) -> None:
        """Mark the owner idle if no attempt runs."""
        raise NotImplementedError


class WorkerPool:
    """Worker tasks over a line of committed attempts; see the module docstring.

    ``tasks`` are the worker tasks alive, ``threads`` the futures of thread handlers running.
    """

    def __init__(
        self,
        starter: SlotOwner,
        outcomes: Outcomes,
        handlers: dict[str, HandlerSpec],
        stats: Counters,
        clock: Clock,
        events: EventBus,
        *,
        max_concurrency: int,
    ) -> None:
        self.tasks: set[asyncio.Task[None]] = set()
        self.threads: set[asyncio.Future[Any]] = set()
        self._starter = starter
        self._handlers = handlers
        self._outcomes = outcomes
        self._stats = stats
        self._clock = clock
        self._events = events
        self._max_concurrency = max_concurrency
        self._go: deque[Timer] = deque()  # attempt committed, waiting for a worker task
        self._top_up_soon = False  # a _top_up callback is scheduled
        self._loop: asyncio.AbstractEventLoop | None = None
        #: Asked right before a committed attempt's handler starts, where a store fences by a
        #: lease (PostgreSQL): False means its lease is no longer usable and the attempt was
        #: given back, not run. None where every committed attempt may run (SQLite, memory).
        self.start_guard: Callable[[Timer], bool] | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def run(self, timers: list[Timer]) -> None:
        """These committed attempts start on worker tasks.

        One task is started at once if none is alive; more only if, one loop turn later, some
        attempts still wait (the tasks alive are all suspended in handlers): a handler that
        returns without suspending lets one task run the whole line, with no task per firing.
        """
        self._go.extend(timers)
        if not self.tasks:
            self._spawn(1)
        if not self._top_up_soon:
            self._top_up_soon = True
            assert self._loop is not None
            self._loop.call_soon(self._top_up)

    def _top_up(self) -> None:
        """As many more tasks as attempts still wait, up to ``max_concurrency`` in all."""
        self._top_up_soon = False
        self._spawn(min(self._max_concurrency - len(self.tasks), len(self._go)))

    def _spawn(self, count: int) -> None:
        for _ in range(count):
            task = asyncio.ensure_future(self._worker())
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    def hand(self, timer: Timer) -> None:
        """Called from a worker whose slot just freed: that worker starts ``timer`` next."""
        self._go.append(timer)

    def drop_waiting(self) -> int:
        """close(): committed attempts not started yet are not run. Returns how many."""
        dropped = len(self._go)
        self._go.clear()
        return dropped

    async def cancel_all(self) -> None:
        """Shutdown: cancel every worker task (their attempts are not acknowledged), wait."""
        for task in list(self.tasks):
            task.cancel()
        if self.tasks:
            await asyncio.gather(*self.tasks, return_exceptions=True)

    async def _worker(self) -> None:
        """Run committed attempts. One task serves many firings; it ends when none is left.

        The attempt is run in this loop itself, not in a coroutine of its own: one coroutine
        object less per firing.
        Shutdown's cancellation propagates: that attempt is not acknowledged.
        """
        task = asyncio.current_task()
        assert task is not None and self._loop is not None
        worker = Worker(task)
        go = self._go
        handlers = self._handlers
        clock = self._clock
        starter = self._starter
        outcomes = self._outcomes
        stats = self._stats
        events = self._events
        served = 0
        while go and not starter.closing:
            timer = go.popleft()
            if starter.alone is timer:  # the queue goes on once its first step has run
                self._loop.call_soon(starter.suspect_started)
            if timer.interrupt == INTERRUPT_CANCEL:  # cancelled before its handler started
                starter.attempt_ended()
                outcomes.complete(timer, asyncio.CancelledError(), cancelled=True)
                continue
            guard = self.start_guard  # the claim's lease may have lapsed while it waited here
            if guard is not None and not guard(timer):
                starter.attempt_ended()
                continue
            spec = handlers[timer.handler]
            error: BaseException | None = None
            timeout = None
            if spec.timeout is not None:
                timeout = clock.call_at(
                    clock.time() + spec.timeout,
                    functools.partial(self.interrupt, timer, INTERRUPT_TIMEOUT),
                )
            firing = None
            try:  # the attempt's span (tracing) wraps from here to outcomes.complete below
                firing = worker.firing = firing_for(timer, clock.time(), stats, events)
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
                    starter.attempt_ended()
                    starter.check_idle()
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
            starter.attempt_ended()
            ran = None  # measured only for a subscriber: no clock read per firing otherwise
            if firing is not None and events.active:
                ran = clock.time() - firing.fired_at
            outcomes.complete(
                timer, error, cancelled=timer.interrupt == INTERRUPT_CANCEL, duration=ran
            )
            served += 1
            if served % WORKER_YIELD_EVERY == 0:
                await asyncio.sleep(0)
        starter.check_idle()

    async def _in_thread(self, spec: HandlerSpec, firing: Firing) -> None:
        assert self._loop is not None
        future = self._loop.run_in_executor(None, spec.fn, firing)
        self.threads.add(future)
        future.add_done_callback(self.threads.discard)
        try:
            await future
        except asyncio.CancelledError:
            firing._request_stop()  # we stop waiting; the thread runs on and can see it
            raise

    def interrupt(self, timer: Timer, reason: str) -> None:
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
