"""The changes the public calls make: schedules, cancels and redrives, in memory then committed.

Each change is made in the timer table first (so a timer due at once can fire while its commit
is in flight) and then committed through :meth:`wheel_engine.commits.Commits.commit`; if the
commit fails, the change is taken back out of memory, newest first, before the caller sees
the error. Each change is emitted on the engine's :class:`~wheel_engine.events.EventBus` once
it is committed (at once in memory), never if it was undone. Versions come from one counter:
every new version of any key is higher than every version before it, in memory and in the
journal.

Inputs are validated already (:mod:`wheel_engine.validation`); nothing here raises for them.
"""

from __future__ import annotations

import itertools
import logging
import secrets

from journal import Cancel, Record, Redrive, Schedule
from wheel_engine.clock import Clock
from wheel_engine.commits import Commits
from wheel_engine.errors import EngineError
from wheel_engine.events import EventBus
from wheel_engine.firing import Trigger
from wheel_engine.model import CancelResult, TimerInfo
from wheel_engine.stats import Counters
from wheel_engine.timer import INTERRUPT_CANCEL, Timer
from wheel_engine.timers import CANCELED, DEAD, PENDING, RUNNING, TimerTable
from wheel_engine.validation import ScheduleRequest
from wheel_engine.workers import WorkerPool

#: An applied schedule: (its request, the new timer, the live timer it replaced or None).
Change = tuple[ScheduleRequest, Timer, Timer | None]

logger = logging.getLogger(__name__)

_new_tuple = tuple.__new__


class Scheduler:
    """Applies and commits the public calls' changes; see the module docstring."""

    def __init__(
        self,
        table: TimerTable,
        commits: Commits,
        stats: Counters,
        clock: Clock,
        trigger: Trigger,
        pool: WorkerPool,
        events: EventBus,
    ) -> None:
        self.next_version = 1  # recovery sets it above the journal's highest
        self._table = table
        self._timers = table.timers  # the table's own dict, read on every schedule
        self._insert = table.insert
        self._commits = commits
        self._stats = stats
        self._clock = clock
        self._trigger = trigger
        self._arm = trigger.arm
        self._pool = pool
        self._events = events
        self._key_prefix = secrets.token_hex(6)  # engine-made keys: "<prefix>-<counter>"
        self._key_counter = itertools.count(1)

    # ------------------------------------------------------------------ schedules
    def apply(self, request: ScheduleRequest) -> tuple[Timer, Change | None]:
        """Put a validated schedule into memory. Returns the timer and, unless an existing
        timer was kept, the change to commit (or undo)."""
        timers = self._timers
        key = request.key
        previous = None
        if key is None:
            key = f"{self._key_prefix}-{next(self._key_counter)}"
        else:
            previous = timers.get(key)
            if previous is not None and previous.state.is_live:
                if request.on_conflict == "keep":
                    return previous, None
                if previous.state is PENDING:
                    self._table.unplace(previous)
        version = self.next_version
        self.next_version = version + 1
        timer = Timer(key, version, request.handler, request.due, request.payload)
        timers[key] = timer  # TimerTable.replace() inlined: schedule()'s hot path
        if previous is not None:
            self._table.finished.pop(key, None)
            self._table.dead.pop(key, None)
        self._insert(timer)
        trigger = self._trigger
        armed = trigger.armed_tick
        if armed is None or timer.tick < armed:
            trigger.arm()
        if self._events.active and self._commits.journal is None:  # else once committed
            self._events.scheduled(timer, self._clock.time())
        return timer, (request, timer, previous)

    async def commit(self, changes: list[Change]) -> None:
        """Commit applied schedules; on failure take them back out of memory, newest first."""
        now = self._clock.time()
        new = _new_tuple
        records: list[Record] = [
            new(Schedule, (timer.key, timer.version, timer.handler, timer.due, request.data, now))
            for request, timer, _ in changes
        ]
        await self._commits.commit(records, track=True, undo=self._undo_schedules, subject=changes)
        events = self._events
        if events.active:
            for _, timer, _ in changes:
                events.scheduled(timer, now)

    async def make_durable(self, applied: list[tuple[Timer, Change | None]]) -> None:
        """Commit what :meth:`apply` changed, and wait for the commits in flight of the timers
        it kept (``on_conflict="keep"`` returns only what is durable)."""
        changes = [change for _, change in applied if change is not None]
        if changes:
            await self.commit(changes)
        commits = self._commits
        kept = [timer.key for timer, change in applied if change is None]
        if kept:
            await commits.wait_committed(kept)

    def _undo_schedules(self, changes: list[Change]) -> None:
        for _, timer, previous in reversed(changes):
            self._undo_schedule(timer, previous)

    def _undo_schedule(self, timer: Timer, previous: Timer | None) -> None:
        if self._table.take_back(timer, previous, self._clock.time()):
            self._arm()

    # ------------------------------------------------------------------ cancel
    async def cancel(self, key: str, version: int | None) -> CancelResult:
        """``Engine.cancel``: a PENDING timer is CANCELED once committed (on failure it is
        PENDING again); a RUNNING one is asked to stop."""
        table = self._table
        timer = table.timers.get(key)
        if timer is None or (version is not None and version != timer.version):
            return CancelResult.NOT_FOUND
        if timer.state is RUNNING:
            self._pool.interrupt(timer, INTERRUPT_CANCEL)
            return CancelResult.CANCEL_REQUESTED
        if timer.state is not PENDING:
            done = not table.forgotten(timer, self._clock.time() - table.retention)
            return CancelResult.ALREADY_DONE if done else CancelResult.NOT_FOUND
        table.unplace(timer)
        table.finish(timer, CANCELED, self._clock.time())
        self._stats.canceled += 1
        if self._commits.journal is not None:
            record = Cancel(timer.key, timer.version, timer.updated_at)
            await self._commits.commit([record], undo=self._undo_cancel, subject=timer)
        if self._events.active:
            self._events.canceled(timer, timer.updated_at)
        return CancelResult.CANCELED

    def _undo_cancel(self, timer: Timer) -> None:
        if self._table.uncancel(timer):
            self._stats.canceled -= 1
            self._arm()

    # ------------------------------------------------------------------ redrive
    async def redrive(self, key: str, due: float, now: float) -> TimerInfo:
        """A new version of the DEAD timer ``key``, PENDING at ``due``, attempts reset.
        Returns it as it was redriven (it may fire before the commit is done), once committed.
        ``KeyError`` if there is no such timer, ``EngineError`` if it is not DEAD.
        """
        dead = self._table.timers.get(key)
        if dead is None:
            raise KeyError(key)
        if dead.state is not DEAD:
            raise EngineError(f"timer {key!r} is {dead.state.value}, not DEAD")
        fresh = Timer(dead.key, self.next_version, dead.handler, due, dead.payload)
        self.next_version += 1
        fresh.packed = dead.packed
        fresh.last_error = dead.last_error  # kept for reading; attempts start again at 0
        fresh.updated_at = now
        table = self._table
        table.replace(fresh, dead)
        table.place(fresh)
        self._arm()
        info = fresh.info()
        if self._commits.journal is not None:
            record = Redrive(dead.key, dead.version, fresh.version, due, now)
            await self._commits.commit(
                [record], track=True, undo=self._undo_redrive, subject=(fresh, dead)
            )
        self._stats.redriven += 1
        if self._events.active:
            self._events.redriven(fresh, now)
        logger.info("redriven %s: version %d -> %d", key, dead.version, fresh.version)
        return info

    def _undo_redrive(self, change: tuple[Timer, Timer]) -> None:
        self._undo_schedule(*change)
