"""Async handlers started eagerly: a coroutine's first step runs inline, a task only if it waits.

Most async handlers in a burst never wait (a cache write, a counter, an early return), and for
those a worker task is pure overhead: a hop through the start queue, a worker wake-up, a loop
turn. So where plain handlers run inline (:mod:`wheel_engine.inline`: in memory, nobody
listening), an async handler's coroutine is stepped once on the spot (``coro.send(None)``), as
Python 3.12's eager tasks do. If it returns, that was the whole attempt: it ends like a plain
handler's. If it yields a future, it really waits, and only then does it become a task's work.

**The host.** A coroutine's first step must see the task that will run the rest of it as the
current task: ``asyncio.timeout()``, ``TaskGroup`` and anyio's cancel scopes capture
``current_task()`` there and later cancel it. So the step runs *as* a :class:`Host`: a task
created ahead, parked on a future of its own (:meth:`EagerStarts._serve`), entered as the
current task (``asyncio.tasks._enter_task``) and in its context (``Context.run``) for the
step alone. A step that returns leaves the host parked for the next one: no task is made per
firing. A step that yields hands the host its coroutine (:class:`Started`): the host wakes,
runs the rest of it (:func:`resume`, which passes every later ``send``/``throw`` on, as
``yield from`` would) and then serves the worker queue like any worker task
(:meth:`Dispatcher._worker <wheel_engine.dispatcher.Dispatcher._worker>`). The next eager
step gets a new host (made then), parked one loop turn later; until then async handlers go
the worker way. The first host is made when the engine starts.

Worked example, a burst of 3 due timers of a handler that returns at once except for ``b``,
which awaits a socket: ``a`` is stepped as host H1, returns: SUCCEEDED, H1 parked still. ``b``
is stepped as H1, yields the socket's future: H1 takes ``b`` and a worker slot, wakes on the
next loop turn and waits for the socket on ``b``'s behalf; a host H2 is made. ``c``: H2 is not
parked yet, so ``c`` joins the queue and starts on a worker task (the general path); the next
burst's steps run as H2.

Guaranteed, as on a worker task: an attempt's timeout counts from its first step, a cancel
reaches its firing (``cancel_requested``) and cancels the task its rest runs on, a cancel or a
self-cancel during the first step is delivered at the first ``await`` (the host's park is
cancelled; :meth:`EagerStarts._serve` throws it into the coroutine), an eager attempt that
waits holds one of the ``max_concurrency`` worker slots, and shutdown cancels the parked host
with the workers. A step taken inside another task (a queue drained by a worker task as its
attempt ended, a virtual clock advanced by a test) swaps the current task for the step's
length, as Python 3.12's eager tasks do.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, cast

from wheel_engine.clock import Cancellable
from wheel_engine.handlers import HandlerSpec
from wheel_engine.model import Firing
from wheel_engine.resume import resume
from wheel_engine.timer import Timer, Worker

if TYPE_CHECKING:
    from wheel_engine.workers import WorkerPool

#: What serves an eager attempt's rest, and the worker queue after it: the dispatcher's worker
#: loop, started with that attempt (and whether a cancel is to be thrown into it first).
Serve = Callable[["Started | None", bool], Coroutine[Any, Any, None]]


class Started:
    """An eager attempt whose first step yielded ``yielded``: what its host needs to go on."""

    __slots__ = ("coro", "firing", "spec", "timeout", "timer", "worker", "yielded")

    def __init__(
        self,
        timer: Timer,
        spec: HandlerSpec,
        firing: Firing,
        coro: Coroutine[Any, Any, Any],
        yielded: Any,
        timeout: Cancellable | None,
        worker: Worker,
    ) -> None:
        self.worker = worker  # its host's: what a cancel or a timeout reaches
        self.timer = timer
        self.spec = spec
        self.firing = firing
        self.coro = coro
        self.yielded = yielded
        self.timeout = timeout

    def rest(self, throw: bool) -> Awaitable[Any]:
        """The rest of the coroutine, to await; ``throw``: a cancel reached it meanwhile."""
        return cast(Awaitable[Any], resume(self.coro, self.yielded, throw))


class Host:
    """A task parked to be the current task of eager first steps; see the module docstring.

    ``handoff`` is the future it waits on, set once its task has taken its first step (None
    until then: not parked yet); ``started`` is the attempt it was handed, if any.
    """

    __slots__ = ("context", "handoff", "loop", "started", "task", "worker")

    def __init__(self, loop: asyncio.AbstractEventLoop, context: contextvars.Context) -> None:
        self.loop = loop
        self.context = context  # the task's own: the step runs in it, as its rest will
        self.handoff: asyncio.Future[None] | None = None
        self.started: Started | None = None
        self.task: asyncio.Task[None] | None = None
        self.worker: Worker | None = None


class EagerStarts:
    """The parked host, and what an eager attempt that waits takes; see the module docstring.

    ``parked`` is the host of the next eager step once it waits on its ``handoff`` (not None):
    the step's caller makes sure a worker slot is free (the step might wait). ``take_slot`` is
    the dispatcher's: it counts one more attempt running on a worker slot. Loop thread only.
    """

    def __init__(
        self,
        pool: WorkerPool,
        serve: Serve,
        take_slot: Callable[[], None],
    ) -> None:
        self._pool = pool
        self._serve_rest = serve
        self._take_slot = take_slot
        pool.stop_parked = self.close
        self._loop: asyncio.AbstractEventLoop | None = None
        self.parked: Host | None = None

    def start(self, loop: asyncio.AbstractEventLoop, enabled: bool) -> None:
        """The engine starts; ``enabled`` where async handlers may start inline (in memory):
        the first host is made now, to be parked by the first burst."""
        self._loop = loop
        if enabled:
            self._new_host()

    def _new_host(self) -> None:
        """Make the next host: parked (its ``handoff`` set) once its task has taken its first
        step. Never used before: a cancel that reached a task not started yet would end it
        before its first line (:meth:`_serve` could not pass it on)."""
        loop = self._loop
        assert loop is not None
        context = contextvars.copy_context()
        host = self.parked = Host(loop, context)
        task = host.task = loop.create_task(self._serve(host), context=context)
        host.worker = Worker(task)

    async def _serve(self, host: Host) -> None:
        """A host's life: parked until handed an attempt, then a worker task (its rest first).
        Cancelled while parked with nothing handed (shutdown, or an interrupt of a first step
        that then returned): it ends."""
        assert self._loop is not None
        handoff = host.handoff = self._loop.create_future()  # parked: eager steps may use it
        throw = False
        try:
            await handoff
        except asyncio.CancelledError:
            if host.started is None:
                return
            throw = True
        await self._serve_rest(host.started, throw)

    def waits(
        self,
        host: Host,
        timer: Timer,
        spec: HandlerSpec,
        firing: Firing,
        coro: Coroutine[Any, Any, Any],
        yielded: Any,
        started_at: float,
    ) -> None:
        """``timer``'s first step (as ``host``, at ``started_at``) yielded ``yielded``: its
        host takes a worker slot and the rest of it. Its timeout counts from the first step."""
        timeout = self._pool.timeout_for(timer, spec, started_at)
        assert host.worker is not None
        host.started = Started(timer, spec, firing, coro, yielded, timeout, host.worker)
        self._new_host()
        self._take_slot()
        task = host.task
        assert task is not None and host.handoff is not None
        self._pool.adopt(task)
        if not host.handoff.done():  # done: a cancel reached it during the step (_serve)
            host.handoff.set_result(None)

    def replace(self, host: Host) -> None:
        """A cancel reached ``host`` during a first step that returned: its park is over (it
        ends, see :meth:`_serve`), and the next step gets a new host."""
        if self.parked is host:
            self._new_host()

    def close(self) -> asyncio.Task[None] | None:
        """Shutdown: the parked host ends; its task, to wait for."""
        host, self.parked = self.parked, None
        if host is None or host.task is None:
            return None
        host.task.cancel()
        return host.task
