"""What reaches a running attempt on a worker: its task, its thread, and how it is stopped.

:class:`WorkerPool` holds the worker tasks alive and the thread handlers' futures, runs a
thread handler's call, and stops a running attempt (:meth:`WorkerPool.interrupt`: a handler's
timeout, a cancel). It keeps no count and decides nothing about what runs next: it hands
the attempts the dispatcher committed (:meth:`WorkerPool.hand`) to worker tasks in order, starting
tasks as needed; the worker loop itself, and the slots, are
:class:`~wheel_engine.dispatcher.Dispatcher`'s.
"""

from __future__ import annotations

import asyncio
import functools
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any

from wheel_engine.clock import Cancellable, Clock
from wheel_engine.handlers import HandlerSpec
from wheel_engine.model import Firing
from wheel_engine.timer import INTERRUPT_TIMEOUT, Timer
from wheel_engine.timers import RUNNING


class WorkerPool:
    """The worker tasks and thread handlers of one engine; see the module docstring.

    ``tasks`` are the worker tasks alive, ``threads`` the futures of thread handlers running.
    """

    def __init__(
        self,
        handlers: dict[str, HandlerSpec],
        work: Callable[[], Coroutine[Any, Any, None]],
        max_concurrency: int,
        clock: Clock,
    ) -> None:
        self._clock = clock
        self.tasks: set[asyncio.Task[None]] = set()
        self.go: deque[Timer] = deque()  # attempts committed, waiting for a worker task
        self._work = work  # a worker task's loop: serves committed attempts until none is left
        self._max_concurrency = max_concurrency
        self._top_up_soon = False  # a _top_up callback is scheduled
        self.threads: set[asyncio.Future[Any]] = set()
        self._handlers = handlers
        self._loop: asyncio.AbstractEventLoop | None = None
        #: Asked right before a committed attempt's handler starts, where a store fences by a
        #: lease (PostgreSQL): False means its lease is no longer usable and the attempt was
        #: given back, not run. None where every committed attempt may run (SQLite, memory).
        self.start_guard: Callable[[Timer], bool] | None = None
        #: Ends the task parked for eager starts (:mod:`wheel_engine.eager`), at shutdown.
        self.stop_parked: Callable[[], asyncio.Task[None] | None] | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def hand(self, committed: list[Timer]) -> None:
        """Attempts committed, to run on worker tasks in this order (:attr:`go`)."""
        self.go.extend(committed)
        if not self.tasks:
            self.spawn(1)
        if not self._top_up_soon:
            self._top_up_soon = True
            assert self._loop is not None
            self._loop.call_soon(self._top_up)

    def _top_up(self) -> None:
        """As many more worker tasks as attempts still wait, up to ``max_concurrency`` in all.

        One task is started at once if none is alive; more only one loop turn later, if some
        attempts still wait (the tasks alive are all suspended in handlers): a handler that
        returns without suspending lets one task run the whole line, with no task per firing.
        """
        self._top_up_soon = False
        self.spawn(min(self._max_concurrency - len(self.tasks), len(self.go)))

    def spawn(self, count: int) -> None:
        """Start ``count`` more worker tasks."""
        for _ in range(count):
            self.adopt(asyncio.ensure_future(self._work()))

    def adopt(self, task: asyncio.Task[None]) -> None:
        """``task`` is a worker task from now on (an eager attempt's host: it serves on)."""
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def timeout_for(self, timer: Timer, spec: HandlerSpec, started_at: float) -> Cancellable | None:
        """The call that interrupts ``timer``'s attempt, started at ``started_at``, once its
        handler's timeout has passed; None if it has none."""
        if spec.timeout is None:
            return None
        return self._clock.call_at(
            started_at + spec.timeout, functools.partial(self.interrupt, timer, INTERRUPT_TIMEOUT)
        )

    async def cancel_all(self) -> None:
        """Shutdown: cancel every worker task (their attempts are not acknowledged), wait."""
        tasks = list(self.tasks)
        parked = None if self.stop_parked is None else self.stop_parked()
        for task in tasks:
            task.cancel()
        if parked is not None:
            tasks.append(parked)
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    async def in_thread(self, spec: HandlerSpec, firing: Firing) -> None:
        """Run a thread handler in the loop's executor and wait for it."""
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


def stale_cancel(task: asyncio.Task[Any]) -> bool:
    """Take back the cancel an interrupt asked of ``task`` for the attempt that just ended;
    True if it is still pending all the same: the handler was interrupted while it ran, not
    at an ``await``, and returned. Python 3.11's ``uncancel()`` leaves such a cancel to hit
    the task's next ``await`` (3.13's clears it): it would stop the next attempt, taken for
    the engine closing. :func:`absorb_cancel` takes it."""
    return task.uncancel() == 0 and bool(getattr(task, "_must_cancel", False))


async def absorb_cancel() -> None:
    """Let a stale cancel (:func:`stale_cancel`) hit here, between attempts; one asked since
    (the engine closing) goes on."""
    try:
        await asyncio.sleep(0)
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise
