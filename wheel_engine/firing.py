"""The one clock callback: armed for the earliest due tick, it takes due timers out of the wheel.

:class:`Trigger` keeps exactly one callback on the engine's clock (none when idle). When it
fires, every timer due by the wall clock leaves the wheel in (tick, version) order and goes to
``on_due`` (the starter's queue, :mod:`wheel_engine.starting`); then finished timers past their
retention are forgotten and the next callback is armed. Between callbacks, the wheel's staged
cascades run a budget per loop callback, so no callback moves a big slot at once.

**The tick in progress.** A timer's tick is its due time rounded up to the tick, and a callback
is armed for the end of a tick; the loop's own timers wake late by up to a millisecond
(``epoll`` rounds its timeout up), so a callback usually runs inside the next tick, when part of
that tick's timers are due already. Each callback also takes the tick in progress out of the
wheel: those due by the wall clock go on now, the others are **held** here until a later
callback (at the latest at that tick's end) finds them due. Without it a timer waited for its
tick's end and then for the loop's rounding: twice the lateness of ``call_at``. A held timer is
PENDING and counted as queued (``Timer.where == QUEUED``), as in the starter's queue, so a
cancel or a replace takes it out the same way (its entry here goes stale and is dropped).

Guaranteed: no timer is handed on before its due time by the clock; held ones keep their order.

Everything here runs on the loop thread; nothing awaits.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from wheel_engine.clock import Cancellable, Clock
from wheel_engine.timer import QUEUED, Timer
from wheel_engine.timers import TimerTable
from wheel_engine.wheel.entry import DETACHED


def _nothing_due(batch: list[Timer], now: float) -> None:
    raise AssertionError("the trigger fired before start()")  # start() sets the real one


class Trigger:
    """Arms the clock for the table's wheel; see the module docstring.

    ``armed_tick`` is the tick the armed callback is for (None: none armed); a caller that
    inserted an earlier timer calls :meth:`arm`.
    """

    def __init__(self, table: TimerTable, clock: Clock, clock_check: float | None) -> None:
        self.armed_tick: int | None = None
        self.started = False
        self.closing = False
        self._table = table
        self._clock = clock
        self._clock_check = clock_check
        self._armed: Cancellable | None = None
        self._on_due: Callable[[list[Timer], float], None] = _nothing_due
        self._loop: asyncio.AbstractEventLoop | None = None
        self._staging = False  # an idle-time staging callback is queued
        self._held: list[Timer] = []  # of the tick in progress, not due yet (see module doc)
        self._held_tick = 0  # the tick by whose end every held timer is due

    def start(
        self, loop: asyncio.AbstractEventLoop, on_due: Callable[[list[Timer], float], None]
    ) -> None:
        """Start arming; ``on_due(batch, now)`` receives each batch of due timers. Overdue
        timers are taken at once, in a callback of their own."""
        self._loop = loop
        self._on_due = on_due
        self.started = True
        self.arm()
        loop.call_soon(self.on_tick)

    def stop(self) -> None:
        """No callback runs any more (the engine is closing or abandoned)."""
        self.closing = True
        self.disarm()

    def arm(self) -> None:
        """Keep exactly one clock callback, for the earliest due tick (none when idle)."""
        if self.closing or not self.started:
            return
        wheel = self._table.wheel
        next_tick = wheel.next_tick()
        if next_tick is not None:
            # The wheel stages a coming slot's cascade a budget at a time inside advance();
            # when the slot before it is empty it asks to be advanced early, so the cascade is
            # not all done at the crossing (a stall of up to a second with a million timers).
            work_tick = wheel.next_work_tick()
            if work_tick is not None and work_tick < next_tick:
                next_tick = work_tick
        if self._held and (next_tick is None or self._held_tick < next_tick):
            next_tick = self._held_tick
        if next_tick == self.armed_tick and self._armed is not None:
            return
        self.disarm()
        if next_tick is None:
            return
        when = next_tick * self._table.tick
        if self._clock_check is not None:
            # A wall clock set forward is noticed within clock_check seconds.
            when = min(when, self._clock.time() + self._clock_check)
        self.armed_tick = next_tick
        self._armed = self._clock.call_at(when, self.on_tick)

    def disarm(self) -> None:
        if self._armed is not None:
            self._armed.cancel()
        self._armed = None
        self.armed_tick = None

    def on_tick(self) -> None:
        """The armed callback: take every timer due by the wall clock and hand it on."""
        self._armed = None
        self.armed_tick = None
        if self.closing:
            return
        table = self._table
        now = self._clock.time()
        current = table.tick_floor(now) + 1  # the tick in progress
        batch = table.wheel.advance(current)
        if self._held:
            batch = self._release(now, batch)
        if batch and batch[-1].tick >= current:
            batch = self._hold(now, batch, current)
        if batch:
            self._on_due(batch, now)
        table.purge_finished(now)
        self.arm()
        if not self._staging and table.wheel.work(0):
            self._staging = True
            assert self._loop is not None
            self._loop.call_soon(self.stage)

    def _hold(self, now: float, batch: list[Timer], current: int) -> list[Timer]:
        """Keep the timers of ``batch`` not due by ``now``; return the due ones, in order."""
        due: list[Timer] = []
        held = self._held
        for timer in batch:
            if timer.due > now:
                timer.where = QUEUED
                held.append(timer)
            else:
                due.append(timer)
        self._table.queued += len(batch) - len(due)
        self._held_tick = current
        return due

    def _release(self, now: float, batch: list[Timer]) -> list[Timer]:
        """The held timers due by ``now`` (stale entries dropped), followed by ``batch``."""
        due: list[Timer] = []
        kept: list[Timer] = []
        for timer in self._held:
            if timer.where != QUEUED:  # cancelled or replaced while it was held
                continue
            if timer.due > now:
                kept.append(timer)
            else:
                timer.where = DETACHED
                due.append(timer)
        self._table.queued -= len(due)
        self._held = kept
        if not due:
            return batch
        due.extend(batch)
        return due

    def stage(self) -> None:
        """Idle-time cascade staging, a budget per loop callback, so other callbacks interleave."""
        if not self.closing and self._table.wheel.work():
            assert self._loop is not None
            self._loop.call_soon(self.stage)
        else:
            self._staging = False
            self.arm()
