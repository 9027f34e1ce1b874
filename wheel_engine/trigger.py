"""The one clock callback: armed for the earliest due, it takes due timers out of the wheel.

:class:`Trigger` keeps exactly one callback on the engine's clock (none when idle). When it
fires, every timer due by the wall clock leaves the wheel in (tick, version) order and goes to
``on_due`` (the starter's queue, :mod:`wheel_engine.starting`); then finished timers past their
retention are forgotten and the next callback is armed. Between callbacks, the wheel's staged
cascades run a budget per loop callback, so no callback moves a big slot at once.

**Armed for the earliest due, not a tick's end.** The loop's own timers wake late by up to a
millisecond (``epoll`` rounds its timeout up to the next whole millisecond, then the kernel adds
its timer slack), so the callback is armed as early as a timer can be due: the **start** of the
wheel's next tick (a timer's tick is its due rounded up, so it is due after that tick's start),
or the exact due of the earliest timer held here (below), whichever is first. Each callback
takes the tick in progress out of the wheel: those due by the wall clock go on now, the others
are **held** here, and the callback is armed for the earliest of them. Armed for a tick's end,
a timer waited for its tick's end and then for the loop's rounding: twice the lateness of
``call_at`` for a lone timer; and timers that fell due while a callback ran waited for the next
one, a millisecond later. Armed for a due that passed while the callback ran, the loop runs it
again at once, as it runs ``call_at`` callbacks that fell due meanwhile. A held timer is
PENDING and counted as queued (``Timer.where == QUEUED``), as in the starter's queue, so a
cancel or a replace takes it out the same way (its entry here goes stale and is dropped).

**At most** :data:`HAND_ON_BUDGET` **due timers of a handler per callback.** A mass expiry
(hundreds of thousands of one handler's timers due in one tick) is handed on over several
callbacks, other callbacks (start groups, commits, the application's) running between them. The
rest waits in that handler's **backlog**, in the order taken, ``QUEUED`` like a held timer, and
that handler's timers that fall due meanwhile join its tail; other handlers' timers are not
held behind it. The callback is armed again at once while a backlog is not empty. Handing on
costs O(1) per timer (a limited handler's go to its gate's line: :mod:`wheel_engine.limits`).

Guaranteed: no timer is handed on before its due time by the clock; held ones are handed on in
(due, version) order, the earliest first (the one that waited longest since its due); a
handler's backlog keeps the order its timers were taken in.

Everything here runs on the loop thread; nothing awaits.
"""

from __future__ import annotations

import asyncio
import math
import operator
from collections import deque
from collections.abc import Callable
from typing import Final

from wheel_engine.clock import Cancellable, Clock
from wheel_engine.timer import QUEUED, Timer
from wheel_engine.timers import TimerTable
from wheel_engine.wheel.entry import DETACHED

_by_due: Final = operator.attrgetter("due")  # the held list's sort key: earliest due first
#: Due timers handed on per clock callback (see the module docstring): a few milliseconds of
#: the starter's routing, so a mass expiry never holds the loop for long.
HAND_ON_BUDGET: Final = 4096


def _nothing_due(batch: list[Timer], now: float) -> None:
    raise AssertionError("the trigger fired before start()")  # start() sets the real one


class Trigger:
    """Arms the clock for the table's wheel; see the module docstring.

    ``armed_tick``: a timer whose tick is below it may be due before the armed callback runs
    (None: none armed); a caller that inserted such a timer calls :meth:`arm`. So does one
    whose insert changed the wheel's ``work_moves`` from ``armed_moves``: it occupied an empty
    upper slot, and the wheel's next staging tick may now come before the armed callback.
    """

    def __init__(self, table: TimerTable, clock: Clock, clock_check: float | None) -> None:
        self.armed_tick: int | None = None
        self.armed_moves = 0  # the wheel's work_moves when the armed time was worked out
        self.started = False
        self.closing = False
        self._table = table
        self._clock = clock
        self._clock_check = clock_check
        self._armed: Cancellable | None = None
        self._on_due: Callable[[list[Timer], float], None] = _nothing_due
        self._loop: asyncio.AbstractEventLoop | None = None
        self._staging = False  # an idle-time staging callback is queued
        self._held: list[Timer] = []  # not due yet, in due order (see the module docstring)
        self._backlog: dict[str, deque[Timer]] = {}  # per handler: due, over its budget
        self._armed_for = 0.0  # the wall time the armed callback was wanted at
        self._asked_at = -math.inf  # the time last asked of the clock's call_at
        self._not_before = -math.inf  # after a callback the loop ran early: no arming before

    def start(
        self, loop: asyncio.AbstractEventLoop, on_due: Callable[[list[Timer], float], None]
    ) -> None:
        """Start arming; ``on_due(batch, now)`` receives each batch of due timers. Overdue
        timers are taken at once, in a callback of their own."""
        self._loop = loop
        self._on_due = on_due
        self.started = True
        loop.call_soon(self._first_tick)

    def _first_tick(self) -> None:
        """At start: take overdue timers at once. A callback that a ``schedule()`` armed before
        this ran is cancelled: :meth:`on_tick` arms the one callback."""
        self.disarm()
        self._asked_at = -math.inf  # this run was not asked for a time: it cannot be early
        self.on_tick()

    def stop(self) -> None:
        """No callback runs any more (the engine is closing or abandoned)."""
        self.closing = True
        self.disarm()

    def arm(self) -> None:
        """Keep exactly one clock callback, for the earliest time a timer can be due (none when
        idle): the start of the wheel's next tick or the earliest held due."""
        if self.closing or not self.started:
            return
        when = self._earliest_due()
        self.armed_moves = self._table.wheel.work_moves
        if when is None:
            self.disarm()
            return
        if when == self._armed_for and self._armed is not None:
            return
        self.disarm()
        self._armed_for = when
        # A timer of a tick below this one may be due before ``when`` (ceil: when in doubt,
        # the caller arms again, which costs a comparison).
        self.armed_tick = math.ceil(when / self._table.tick) + 1
        if when < self._not_before:
            when = self._not_before
        if self._clock_check is not None:
            # A wall clock set forward is noticed within clock_check seconds.
            when = min(when, self._clock.time() + self._clock_check)
        self._asked_at = when
        self._armed = self._clock.call_at(when, self.on_tick)

    def _earliest_due(self) -> float | None:
        """The earliest wall time at which a timer in the wheel or held here may be due."""
        wheel = self._table.wheel
        when: float | None = None
        next_tick = wheel.next_tick()
        if next_tick is not None:
            # The wheel stages a coming slot's cascade a budget at a time inside advance();
            # when the slot before it is empty it asks to be advanced early, so the cascade is
            # not all done at the crossing (a stall of up to a second with a million timers).
            work_tick = wheel.next_work_tick()
            if work_tick is not None and work_tick < next_tick:
                next_tick = work_tick
            when = self._start_of(next_tick)
        held = self._held
        if held and (when is None or held[0].due < when):
            when = held[0].due  # perhaps a stale entry's: that callback drops it
        if self._backlog:
            when = self._clock.time()  # due already: the next part at once
        return when

    def _start_of(self, tick: int) -> float:
        """The earliest wall time at which :meth:`on_tick` takes ``tick`` out of the wheel: where
        ``table.tick_floor`` reads ``tick - 1``. Rounding may put ``(tick - 1) * table.tick`` a
        hair before that; a callback armed there would find nothing to take and arm again for
        the same time, forever on a clock that does not move by itself."""
        size = self._table.tick
        start = (tick - 1) * size
        while math.floor(start / size) < tick - 1:
            start = math.nextafter(start, math.inf)
        return start

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
        if now < self._asked_at:
            # The loop ran it before the time asked (uvloop rounds a delay to the nearest
            # millisecond, so its timers run up to half of one early). Armed again for a due
            # that close, it would run at once, and again: a busy loop until the due. So the
            # next callback is a tick from now at the soonest: late by up to a tick on such a
            # loop, never early.
            self._not_before = now + table.tick
        else:
            self._not_before = -math.inf
        current = table.tick_floor(now) + 1  # the tick in progress
        batch = table.wheel.advance(current)
        if self._held:
            batch = self._release(now, batch)
        if batch and batch[-1].tick >= current:
            batch = self._hold(now, batch)
        if self._backlog or len(batch) > HAND_ON_BUDGET:
            batch = self._within_budget(batch)
        if batch:
            self._on_due(batch, now)
        table.purge_finished(now)
        self.arm()
        if not self._staging and table.wheel.work(0):
            self._staging = True
            assert self._loop is not None
            self._loop.call_soon(self.stage)

    def _hold(self, now: float, batch: list[Timer]) -> list[Timer]:
        """Keep the timers of ``batch`` not due by ``now``; return the due ones, in order."""
        due: list[Timer] = []
        held = self._held
        before = len(held)
        for timer in batch:
            if timer.due > now:
                timer.where = QUEUED
                held.append(timer)
            else:
                due.append(timer)
        self._table.queued += len(held) - before
        if len(held) > 1:
            held.sort(key=_by_due)  # stable: equal dues keep their (version) order
        return due

    def _within_budget(self, batch: list[Timer]) -> list[Timer]:
        """What to hand on now: per handler, the first :data:`HAND_ON_BUDGET` live timers of its
        backlog, then of ``batch``; the rest joins (or starts) its backlog, ``QUEUED``."""
        backlog = self._backlog
        table = self._table
        due: list[Timer] = []
        taken: dict[str, int] = {}
        for handler, waiting in list(backlog.items()):
            count = 0
            while waiting and count < HAND_ON_BUDGET:
                timer = waiting.popleft()
                if timer.where == QUEUED:  # else cancelled or replaced while it waited here
                    timer.where = DETACHED
                    due.append(timer)
                    count += 1
            table.queued -= count
            taken[handler] = count
            if not waiting:
                del backlog[handler]
        held_back = 0
        for timer in batch:
            handler = timer.handler
            line = backlog.get(handler)
            if line is None:
                count = taken.get(handler, 0)
                if count < HAND_ON_BUDGET:
                    taken[handler] = count + 1
                    due.append(timer)
                    continue
                line = backlog[handler] = deque()
            timer.where = QUEUED
            line.append(timer)
            held_back += 1
        table.queued += held_back
        return due

    def _release(self, now: float, batch: list[Timer]) -> list[Timer]:
        """The held timers due by ``now`` (stale entries dropped), followed by ``batch``.

        The held list is in due order, so the due ones are its head; a stale entry (its timer
        cancelled or replaced while held) is dropped when it reaches the head."""
        held = self._held
        due: list[Timer] = []
        taken = 0
        for timer in held:
            if timer.due > now:
                break
            taken += 1
            if timer.where == QUEUED:  # else cancelled or replaced while it was held
                timer.where = DETACHED
                due.append(timer)
        del held[:taken]
        if not due:
            return batch
        self._table.queued -= len(due)
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
