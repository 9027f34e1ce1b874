"""The fire path's common case in one tight loop: plain handlers in memory, nobody listening.

:class:`InlineRunner` runs due timers' plain handlers on the spot, one after another, each
charged, fired and (when it returns) SUCCEEDED in one step: no queue entry, no start group, no
list of successes. Its firing and its success are the general path's own
(:func:`~wheel_engine.firing.firing_for`, :meth:`~wheel_engine.outcomes.Outcomes.succeeded`).
It is what ``call_at`` does for a callback, plus the engine's bookkeeping.

The dispatcher (:mod:`wheel_engine.dispatcher`) uses it only when nothing needs the general path:
no journal (no attempt to commit first), no event subscriber, no crash suspect, no group in
flight and nothing waiting in its queue (so the queue's order is kept). The runner itself stops
at the first timer that is not the common case (an async or thread handler, a handler not
registered, a timer that carries an interrupt or has no attempt left, one not due yet, a
subscriber that appeared meanwhile) or after ``budget`` timers; the dispatcher hands the rest
to the general path. A handler that raises goes to :class:`~wheel_engine.outcomes.Outcomes` as on
the general path (retry or DEAD).

Guaranteed: the same states, counters, lateness samples and outcome records as the general
path; a timer never starts before its due time. Different from the general path, and not
observable through the public API but by a handler reading the engine: each timer is charged
right before its own handler runs, not with its whole group, so a handler sees the timers after
it in the batch still PENDING (as ``call_at`` callbacks see each other).
"""

from __future__ import annotations

import asyncio
from asyncio.tasks import _enter_task, _leave_task
from collections import deque
from collections.abc import Coroutine
from typing import Any

from wheel_engine.eager import EagerStarts, Host
from wheel_engine.events import EventBus
from wheel_engine.firing import firing_for
from wheel_engine.handlers import HandlerSpec
from wheel_engine.outcomes import Outcomes
from wheel_engine.resume import RETURNED, first_step
from wheel_engine.stats import Counters
from wheel_engine.timer import INTERRUPT_CANCEL, QUEUED, Timer
from wheel_engine.timers import TimerTable


class InlineRunner:
    """Runs plain handlers at once; see the module docstring. Loop thread only."""

    __slots__ = ("_eager", "_events", "_handlers", "_outcomes", "_stats", "_table")

    def __init__(
        self,
        table: TimerTable,
        outcomes: Outcomes,
        stats: Counters,
        events: EventBus,
        eager: EagerStarts,
    ) -> None:
        self._eager = eager
        self._table = table
        self._handlers = table.handlers
        self._outcomes = outcomes
        self._stats = stats
        self._events = events

    def run_batch(self, batch: list[Timer], now: float, budget: int, room: bool) -> int:
        """Run the plain handlers of ``batch`` (due timers just out of the wheel, in order)
        from its head, and the async ones eagerly while ``room`` (a worker slot is free) and a
        host is parked; return how many timers were taken (the rest is the caller's)."""
        handlers = self._handlers
        events = self._events
        eager = self._eager
        taken = 0
        for timer in batch:
            if taken >= budget or timer.due > now or events.active:
                break
            spec = handlers.get(timer.handler)
            if spec is None or timer.interrupt is not None:
                break
            if timer.attempts >= spec.retry.max_attempts:
                break
            if spec.inline:
                self.fire(timer, spec, now)
            elif (
                spec.eager
                and room
                and (host := eager.parked) is not None
                and host.handoff is not None
            ):
                self.fire_async(timer, spec, now, host)
            else:
                break
            taken += 1
        return taken

    def run_queue(self, ready: deque[Timer], now: float, budget: int, room: bool) -> int:
        """Run plain handlers (and async ones, as :meth:`run_batch` does) off the head of the
        starter's queue (due, checked, ``QUEUED``), skipping stale entries; return how many
        ran. Stops at the first other timer."""
        handlers = self._handlers
        taken: list[Timer] = []
        specs: list[HandlerSpec] = []
        popleft = ready.popleft  # bound once: a deque method call costs a lookup each time
        while ready and len(taken) < budget:
            timer = popleft()
            if timer.where != QUEUED:  # cancelled or replaced while it waited
                continue
            spec = handlers[timer.handler]
            if not (spec.inline or (spec.eager and room)) or timer.interrupt is not None:
                ready.appendleft(timer)  # the general path's, at the head as it was
                break
            taken.append(timer)
            specs.append(spec)
        self._table.queued -= len(taken)  # out of the queue, as a group leaves it
        events = self._events
        eager = self._eager
        for i, timer in enumerate(taken):
            spec = specs[i]
            if events.active:  # a handler subscribed: the rest goes back for the general path
                self._requeue(ready, taken[i:])
                return i
            if spec.inline:
                self.fire(timer, spec, now)
            elif (host := eager.parked) is not None and host.handoff is not None:
                self.fire_async(timer, spec, now, host)
            else:  # the host waits with an attempt now: the rest is for the general path
                self._requeue(ready, taken[i:])
                return i
        return len(taken)

    def _requeue(self, ready: deque[Timer], timers: list[Timer]) -> None:
        """Put ``timers`` back at the head of the queue, in their order."""
        ready.extendleft(reversed(timers))
        self._table.queued += len(timers)

    def fire_async(self, timer: Timer, spec: HandlerSpec, now: float, host: Host) -> None:
        """Charge ``timer``'s attempt and step its async handler once, as ``host``: it ends
        here if the step returns, and is handed to ``host`` if it waits (:mod:`.eager`)."""
        timer.charge(now)
        firing = firing_for(timer, now, self._stats, self._events)
        worker = host.worker
        task = host.task
        assert worker is not None and task is not None
        worker.firing = firing
        timer.worker = worker  # a cancel during the step reaches it, as on a worker task
        coro: Coroutine[Any, Any, Any] = spec.fn(firing)  # type: ignore[assignment]
        error: BaseException | None = None
        waits = False
        yielded = None
        loop = host.loop
        outer = asyncio.current_task(loop)  # a task taking the step (see eager): swapped out
        if outer is not None:
            _leave_task(loop, outer)
        _enter_task(loop, task)
        try:
            yielded = first_step(host.context, coro)
            waits = yielded is not RETURNED
        except (Exception, asyncio.CancelledError) as exc:
            error = exc
        finally:
            _leave_task(loop, task)
            if outer is not None:
                _enter_task(loop, outer)
        if waits:
            self._eager.waits(host, timer, spec, firing, coro, yielded, now)
            return
        worker.firing = None
        timer.worker = None
        if task.cancelling():  # an interrupt during the step: it ends the host's park
            self._eager.replace(host)
        if error is None:
            self._outcomes.succeeded(timer, now)
        else:
            self._outcomes.complete(timer, error, cancelled=timer.interrupt == INTERRUPT_CANCEL)

    def fire(self, timer: Timer, spec: HandlerSpec, now: float) -> None:
        """Charge ``timer``'s attempt, run its plain handler and record how it ended."""
        timer.charge(now)
        firing = firing_for(timer, now, self._stats, self._events)
        try:
            spec.fn(firing)
        except Exception as exc:
            self._outcomes.complete(timer, exc)
            return
        self._outcomes.succeeded(timer, now)
        if self._events.active:  # the handler subscribed: the runner stops after this one
            self._events.succeeded(timer, now, None)
