"""The timer table: every timer the engine knows, and where each pending one waits.

One :class:`~wheel_engine.timer.Timer` per key (its latest version) is in ``timers``; the other
indexes hold the same objects: the wheel (pending, due later), the queue count (due, waiting to
start; the queue itself is :mod:`wheel_engine.starting`'s), the parking (pending, but no handler
is registered under its name), ``finished`` (the retention window of SUCCEEDED and CANCELED
ones, in finishing order) and ``dead`` (DEAD ones, kept until redriven or replaced).

Guaranteed: a pending timer is in exactly one of the wheel, the queue and the parking; a
finished one leaves ``timers`` only through :meth:`TimerTable.purge_finished`, oldest first.
Nothing here awaits or arms a clock: the caller arms after placing a timer.
"""

from __future__ import annotations

import logging
import math
import operator
from collections import Counter
from typing import TYPE_CHECKING

from wheel_engine.errors import IllegalTransition
from wheel_engine.handlers import HandlerSpec
from wheel_engine.key_index import KeyIndex
from wheel_engine.model import TimerInfo, TimerState
from wheel_engine.restoring import place_recovered
from wheel_engine.retention import RetentionWindow
from wheel_engine.timer import INTERRUPT_CRASH, QUEUED, Timer, ticked
from wheel_engine.wheel import TimingWheel
from wheel_engine.wheel.entry import DETACHED

if TYPE_CHECKING:
    from journal.recovery import Recovered

logger = logging.getLogger(__name__)

PENDING = TimerState.PENDING
RUNNING = TimerState.RUNNING
SUCCEEDED = TimerState.SUCCEEDED
CANCELED = TimerState.CANCELED
DEAD = TimerState.DEAD

_retention_order = operator.attrgetter("updated_at", "key")


class TimerTable:
    """The indexes by key and the placement of pending timers; see the module docstring.

    ``queued`` counts the timers whose ``where`` is ``QUEUED`` (the starter's queue may also
    hold stale entries of timers cancelled or replaced while they waited).
    """

    def __init__(
        self,
        handlers: dict[str, HandlerSpec],
        *,
        tick: float,
        retention: float,
        max_retained: int,
    ) -> None:
        self.handlers = handlers  # shared with the engine, which registers into it
        self.tick = tick
        self.retention = retention
        self.max_retained = max_retained
        self.timers = KeyIndex()  # key -> its latest version, live or finished
        # SUCCEEDED and CANCELED timers in finishing order, for retention: a deque, so that
        # the fire path never pays a rehash (see wheel_engine.retention).
        self.finished = RetentionWindow(self.timers, retention, max_retained)
        self.dead: dict[str, Timer] = {}  # DEAD timers: kept until redriven or replaced
        self.unhandled: dict[str, dict[str, Timer]] = {}  # handler name -> parked due timers
        self.wheel: TimingWheel[Timer] = TimingWheel(0)
        self.queued = 0  # timers due and waiting in the starter's queue

    # ------------------------------------------------------------------ the wheel
    def start_wheel(self, now: float) -> None:
        """A fresh wheel whose current tick is ``now``'s (called once, before any insert)."""
        self.wheel = TimingWheel(self.tick_floor(now))

    def tick_floor(self, when: float) -> int:
        return math.floor(when / self.tick)

    def insert(self, timer: Timer) -> None:
        """Into the wheel at its due tick, rounded up: a tick is never before the due time."""
        self.wheel.insert_entry(ticked(timer, self.tick))

    def place(self, timer: Timer) -> None:
        """A pending timer goes into the wheel, or is parked if its handler is unknown."""
        if timer.handler in self.handlers:
            self.insert(timer)
        else:
            self.park(timer)

    def park(self, timer: Timer) -> None:
        self.unhandled.setdefault(timer.handler, {})[timer.key] = timer

    def unpark(self, handler: str) -> bool:
        """``handler`` is registered now: its parked timers go into the wheel. True if any."""
        parked = self.unhandled.pop(handler, None)
        if not parked:
            return False
        for timer in parked.values():
            self.insert(timer)
        return True

    def unplace(self, timer: Timer) -> None:
        """Take a pending timer out of the wheel, the queue or the parking lot."""
        if timer.where == QUEUED:  # its queue entry goes stale: the starter skips it
            timer.where = DETACHED
            self.queued -= 1
        elif timer.where != DETACHED:
            self.wheel.remove(timer)
        else:
            parked = self.unhandled.get(timer.handler)
            if parked is not None and parked.get(timer.key) is timer:  # not a newer version's
                del parked[timer.key]
                if not parked:
                    del self.unhandled[timer.handler]

    def pending(self) -> int:
        """Timers PENDING: in the wheel, queued or parked."""
        return len(self.wheel) + self.queued + self.parked()

    def parked(self) -> int:
        return sum(len(parked) for parked in self.unhandled.values())

    # ------------------------------------------------------------------ finishing
    def finish(self, timer: Timer, state: TimerState, now: float) -> None:
        """``timer`` ends in ``state``. SUCCEEDED and CANCELED ones enter the retention window
        (which forgets the oldest at once if it is full); DEAD ones are kept in ``dead``.

        The change is the timer's own guarded transition (``Timer.succeed``, ``cancel``,
        ``kill``); a timer built in ``state`` already (a finished row adopted: never retained
        before, so it enters the window as any other) is only filed."""
        if timer.state is state:
            timer.updated_at = now
        elif state is DEAD:
            timer.kill(now)
        elif state is CANCELED:
            timer.cancel(now)
        elif state is SUCCEEDED:
            timer.succeed(now)
        else:
            raise IllegalTransition(timer.key, timer.version, f"finish as {state}", timer.state, "")
        if state is DEAD:
            self.dead[timer.key] = timer
        elif self.timers.holds(timer):  # the window counts only keys' latest versions
            self.finished.add(timer)
            self.purge_finished(now)

    def purge_finished(self, now: float) -> None:
        """Forget finished timers older than ``retention`` and the oldest beyond ``max_retained``.

        Called whenever timers finish and on every tick, so the window holds whatever the churn:
        O(1) when nothing is to be forgotten, O(1) per timer forgotten. DEAD timers are not in
        the window: they stay until redriven or replaced.
        """
        self.finished.purge(now)

    def forgotten(self, timer: Timer, horizon: float) -> bool:
        """Finished before ``horizon`` (now - retention) but not purged yet (no tick or finish
        since): reads do not see it, as they would not after a restart."""
        state = timer.state
        if state is not SUCCEEDED and state is not CANCELED:
            return False
        return timer.updated_at <= horizon

    # ------------------------------------------------------------------ reading
    def info(self, key: str, now: float) -> TimerInfo | None:
        """The timer ``key`` as it is now, unless unknown or past its retention."""
        timer = self.timers.get(key)
        if timer is None or self.forgotten(timer, now - self.retention):
            return None
        return timer.info()

    def select(self, state: TimerState | None, handler: str | None, now: float) -> list[TimerInfo]:
        """Every timer readable now, only those in ``state`` and of ``handler`` if given."""
        horizon = now - self.retention
        forgotten = self.forgotten
        return [
            timer.info()
            for timer in self.timers.values()
            if (state is None or timer.state is state)
            and (handler is None or timer.handler == handler)
            and not forgotten(timer, horizon)
        ]

    # ------------------------------------------------------------------ replacing and undoing
    def forget(self, timer: Timer) -> bool:
        """The one way a timer leaves the table before it finished here: its version never
        became durable (:meth:`take_back`), or another node holds it now (``nodes.adopting``).
        A pending one leaves the wheel, the queue or the parking; if it is its key's current
        version, it leaves every index too and True is returned. Its state is the caller's."""
        if timer.state is PENDING:
            self.unplace(timer)
        if not self.timers.holds(timer):
            return False
        self.finished.discard(timer)  # it may have run and succeeded before the commit failed
        self.dead.pop(timer.key, None)
        self.timers.delete(timer)
        return True

    def replace(self, timer: Timer, previous: Timer | None) -> None:
        """``timer`` is the key's new version (``previous``, if any, out of the wheel already)."""
        if previous is not None:
            self.finished.discard(previous)
            self.dead.pop(timer.key, None)
        self.timers.put(timer)

    def take_back(self, timer: Timer, previous: Timer | None, now: float) -> bool:
        """A new version's commit failed: ``previous`` is the key's timer again, as it was.

        Returns True if a timer went back into the wheel (the caller arms).
        """
        if not self.forget(timer):
            return False  # replaced again meanwhile; that later call owns the key
        timer.void()  # this version never existed durably: it must not fire
        if previous is None:
            return False
        self.timers.put(previous)
        if previous.state is PENDING:
            self.place(previous)
            return True
        if previous.state is DEAD:
            self.dead[timer.key] = previous
        else:
            self.finished.add(previous)
            self.purge_finished(now)
        return False

    def uncancel(self, timer: Timer) -> bool:
        """A cancel's commit failed: ``timer`` is PENDING again. True if it went back."""
        if not timer.may_uncancel:
            return False
        current = self.timers.get(timer.key)
        # Retention may have forgotten it already (retention=0): then it comes back too.
        if current is not timer and current is not None:
            return False
        self.finished.discard(timer)
        self.timers.put(timer)
        timer.uncancel()
        self.insert(timer)
        return True

    # ------------------------------------------------------------------ recovery
    def restore(self, recovered: Recovered[Timer], now: float, path: str) -> None:
        """Take in the timers recovery built at ``path`` (logged: how many of each state).

        Recovery made them as engine timers (:func:`~wheel_engine.timer.recovered_timer`), has
        turned RUNNING ones into PENDING ones and listed them as ``interrupted``: those are
        crash suspects (see :mod:`wheel_engine.starting`). Pending ones go into the wheel in one
        compiled pass (:mod:`wheel_engine.restoring`), finished ones enter the retention window
        in the journal's own order.
        """
        recovered_timers = recovered.timers
        # The index by key is shared with the request checker, so it is filled, not replaced.
        self.timers.update(recovered_timers)
        # One compiled pass: pending timers go into the wheel, the others are listed.
        placed = place_recovered(recovered_timers, self.handlers, self.tick, self.wheel)
        for timer in placed.parked:
            self.park(timer)
        for timer in placed.dead:
            self.dead[timer.key] = timer
        finished = placed.finished
        counts = Counter(timer.state for timer in finished)
        counts[PENDING] = placed.in_wheel + len(placed.parked)
        counts[DEAD] = len(self.dead)  # empty before: restore runs once, at start
        # The retention window forgets from the front. The journal's compaction orders finished
        # rows the same way, by (updated_at, key), so both keep the same ones.
        finished.sort(key=_retention_order)
        self.finished.reset(finished)
        self.purge_finished(now)
        timers = self.timers
        for key in recovered.interrupted:
            timers[key].interrupt = INTERRUPT_CRASH
        logger.info(
            "recovered %s: %d records, %s, next version %d",
            path,
            recovered.records,
            ", ".join(f"{counts[s]} {s.lower()}" for s in TimerState if counts[s]) or "no timers",
            recovered.max_version + 1,
        )
