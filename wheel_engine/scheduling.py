"""The changes the public calls make: schedules, cancels and redrives, in memory then committed.

One path per schedule, one request or a batch: its key is resolved (made by the engine, or the timer
it replaces or keeps), its timer built at the next version and put into memory by the one placing
step, :meth:`Scheduler._place` (a redrive's and a successor's too; a timer due at once may fire
while its commit is in flight), then committed (:meth:`~wheel_engine.commits.Commits.commit_rows`).
Two branches do less, each chosen before anything changes: a new key on SQLite
(:meth:`Scheduler.submit_fresh`: its row goes to the writer first, no coroutine of its own) and a
batch of new keys (:meth:`Scheduler._fresh`: checked and built in one pass, rows encoded). A failed
commit's change is taken back out of memory, newest first, before the caller sees the error; a
change is emitted (:class:`~wheel_engine.events.EventBus`) once committed (at once in memory), never
if undone. Versions come from one counter: each new version of any key is above every earlier one. A
single request comes validated (:mod:`wheel_engine.validation`); a batch is validated in the pass
that builds it, before anything changes. Nothing else raises for bad input.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Iterable, Mapping
from math import ceil
from typing import Any

from journal import Cancel, Redrive
from journal.codec import SCHEDULE_KIND, schedule_body, schedule_row
from wheel_engine.bare_requests import bare_head
from wheel_engine.clock import Clock
from wheel_engine.commits import Commits
from wheel_engine.errors import EngineError, TimerNotFound
from wheel_engine.events import EventBus
from wheel_engine.gcpause import gc_paused
from wheel_engine.model import CancelResult, TimerInfo
from wheel_engine.stats import Counters
from wheel_engine.timer import INTERRUPT_CANCEL, Timer
from wheel_engine.timers import CANCELED, DEAD, PENDING, RUNNING, TimerTable
from wheel_engine.trigger import Trigger
from wheel_engine.validation import CheckedRequest, RequestChecker
from wheel_engine.workers import WorkerPool

#: An applied schedule: (its request, the new timer, the live timer it replaced or None).
Change = tuple[CheckedRequest, Timer, Timer | None]
Row = tuple[int, bytes]  #: (kind, msgpack body), as :func:`journal.codec.schedule_row` makes it
#: What ``schedule_many`` gets: a list or tuple of mappings of ``schedule()``'s keywords.
Requests = list[Mapping[str, Any]] | tuple[Mapping[str, Any], ...]

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
        self._timers = table.timers  # the table's own index, read on every schedule
        self._tick = table.tick  # fixed for the engine's life
        self._commits = commits
        self._stats = stats
        self._clock = clock
        self._trigger = trigger
        self._arm = trigger.arm
        self._pool = pool
        self._events = events
        self._keys = table.timers.made  # the keys of requests that name none
        self.tracing: Any = None  # tracing (#29): a ContextVar of the trace, set only when on

    def apply(self, request: CheckedRequest) -> tuple[Timer, Change | None]:
        """Put a validated schedule into memory. Returns the timer and, unless an existing
        timer was kept, the change to commit (or undo)."""
        timers = self._timers
        key = request.key
        previous, serial = None, 0
        if key is None:  # the timer keeps its serial, its key spelled only when asked
            key, serial = self._keys.prefix, self._keys.take()
        else:
            previous = timers.get(key)
            if previous is not None and previous.state.is_live:
                if request.on_conflict == "keep":
                    return previous, None
                if previous.state is PENDING:
                    self._table.unplace(previous)
        version = self.next_version
        self.next_version = version + 1
        timer = Timer(key, version, request.handler, request.due, request.payload, serial=serial)
        if self.tracing:  # tracing (#29): the call's context
            timer.trace = self.tracing.get()
        if self._place(timer, previous):
            self._arm()
        return timer, (request, timer, previous)

    def place_new(self, made: Iterable[Timer]) -> None:
        """Put new versions of keys no timer holds into memory (:meth:`_place`), then arm once
        if any of them asks for it."""
        if any([self._place(timer, None) for timer in made]):  # a list: every one is placed
            self._arm()

    def _place(self, timer: Timer, previous: Timer | None) -> bool:
        """The one step that puts a new version into memory, whatever made it (a schedule, one
        or a batch's; a redrive): ``timer`` is its key's instead of ``previous`` (out of the
        wheel already), in the wheel at its due rounded up to a tick (``ticked``) or, a
        redrive's handler unregistered, parked. True if the clock must be armed for it."""
        if previous is not None:  # TimerTable.replace, inline: timers.py is interpreted
            table = self._table
            table.finished.discard(previous)
            table.dead.pop(previous.key, None)
            if timer.handler not in table.handlers:  # a schedule's handler is registered
                self._timers.put(timer)
                table.park(timer)
                return False
        self._timers.put(timer)
        timer.tick = ceil(timer.due / self._tick)  # TimerTable.insert, inline, with ticked()
        wheel = self._table.wheel
        wheel.insert_entry(timer)
        armed = self._trigger.armed_tick
        # Due before the armed callback, or the insert may have moved the next staging tick.
        return armed is None or timer.tick < armed or wheel.work_moves != self._trigger.armed_moves

    async def commit(self, changes: list[Change]) -> None:
        """Commit applied schedules; on failure take them back out of memory, newest first."""
        now = self._clock.time()
        traced = bool(self.tracing)  # tracing (#29): else apply() gave no timer a trace
        rows = [
            schedule_row(
                t.key, t.version, t.handler, t.due, request.data, now, t.trace if traced else None
            )
            for request, t, _ in changes
        ]
        keys = [timer.key for _, timer, _ in changes]
        await self._commits.commit_rows(rows, keys, undo=self._undo_schedules, subject=changes)
        if self._events.active:
            self._emit_scheduled([timer for _, timer, _ in changes], now)

    def _emit_scheduled(self, timers: list[Timer], now: float) -> None:
        """The ``scheduled`` events of committed timers (in memory: of applied ones)."""
        events = self._events
        if events.active:
            for timer in timers:
                events.scheduled(timer, now)

    async def make_durable(self, applied: list[tuple[Timer, Change | None]]) -> None:
        """Commit what :meth:`apply` changed, and wait for the commits in flight of the timers
        it kept (``on_conflict="keep"`` returns only what is durable)."""
        changes = [change for _, change in applied if change is not None]
        if changes:
            await self.commit(changes)
        kept = [timer.key for timer, change in applied if change is None]
        if kept:
            await self._commits.wait_committed(kept)

    def submit_fresh(
        self, request: CheckedRequest, now: float
    ) -> tuple[Timer, asyncio.Future[None]] | None:
        """``schedule()``'s common case in one step, or None (nothing changed) when it is not:
        a SQLite journal and a key that names no timer (or none given). The timer goes into
        memory and its row to the writer; no coroutine, list or closure is made for it. Returns
        the timer and its commit's future; the caller awaits the future and then calls
        :meth:`settle_fresh`, also when the await raised. A closed journal raises, unchanged.

        Why: every object a waiting ``schedule()`` keeps alive is walked by the cyclic collector
        (``docs/design.md``); while it waits, its caller (``front.schedule``) keeps alive its
        coroutine, the timer and the future, not the pair returned (unpacked at once)."""
        key = request.key
        if key is not None and key in self._timers:
            return None
        serial = 0 if key is not None else self._keys.take()  # the timer keeps it unspelled
        version = self.next_version
        handler, due = request.handler, request.due
        base = self._keys.prefix if key is None else key
        timer = Timer(base, version, handler, due, request.payload, serial=serial)
        key = timer.key
        future = self._commits.rows.submit_row(
            SCHEDULE_KIND, schedule_body(key, version, handler, due, request.data, now)
        )
        self.next_version = version + 1
        if self._place(timer, None):
            self._arm()
        self._commits.committing[key] = future
        return timer, future

    def settle_fresh(
        self, timer: Timer, future: asyncio.Future[None], due: float, committed: bool
    ) -> TimerInfo:
        """After the await of :meth:`submit_fresh`'s ``timer``'s commit ``future`` (``due``: the
        timer's due when it was submitted), ``committed`` if the await returned (the commit is
        done), else from the caller's ``except`` with the await's error still to raise: a failed
        commit is undone (before the caller sees the error), a successful one is emitted. A
        cancelled await (the future is cancelled with it) undoes nothing, as
        :meth:`Commits.commit_rows <wheel_engine.commits.Commits.commit_rows>` says.

        Returns the timer as it was scheduled, though it may have fired meanwhile: the fields a
        firing changes are those of a new timer (``due``; PENDING, no attempt, no error), the others
        never change."""
        if committed:  # the common case asks the future nothing: its await returned
            self._committed_fresh(timer, future)
        elif future.done() and not future.cancelled():  # raised, yet the commit is over
            if future.exception() is None:  # the commit made it: the caller was cancelled
                self._committed_fresh(timer, future)
            else:
                self._commits.untrack((timer.key,), future)
                self._undo_schedule(timer, None)
        return _new_tuple(
            TimerInfo,
            (timer.key, timer.version, timer.handler, due, timer.payload, PENDING, 0, None),
        )

    def _committed_fresh(self, timer: Timer, future: asyncio.Future[None]) -> None:
        """A fresh schedule's commit is done: its key leads to it no more (unless a later
        commit took it over: :meth:`Commits.untrack`, inline), and it is emitted. Compaction
        was checked by the journal's commit itself (``Commits.open``), once for the batch."""
        committing = self._commits.committing
        key = timer.key
        if committing.get(key) is future:
            del committing[key]
        if self._events.active:
            self._events.scheduled(timer, self._clock.time())

    def schedule_one(
        self, request: CheckedRequest
    ) -> tuple[TimerInfo, Coroutine[Any, Any, TimerInfo] | None]:
        """``schedule()``'s general path: :meth:`apply`; returns the timer as scheduled (it may
        fire and change before the commit is done) and the commit to await, which returns it
        too; None where the commit is done at once (in memory: no coroutine is made)."""
        timer, change = self.apply(request)
        info = timer.info()
        if self._commits.instant:
            if change is not None and self._events.active:
                self._emit_scheduled([timer], self._clock.time())
            return info, None
        return info, self._make_one_durable(info, timer, change)

    async def _make_one_durable(
        self, info: TimerInfo, timer: Timer, change: Change | None
    ) -> TimerInfo:
        await self.make_durable([(timer, change)])
        return info

    def schedule_many(
        self, check: RequestChecker, requests: Iterable[Mapping[str, Any]], now: float
    ) -> tuple[list[TimerInfo], Coroutine[Any, Any, None] | None]:
        """Validate and apply a ``schedule_many`` batch: the timers as scheduled, and the commit
        to await (None in memory). Raises for bad input before anything changes.

        A batch of new keys (or none given) takes one pass (:meth:`_fresh`); anything else (a
        key that names a timer, or one given twice) the general path: every request checked,
        then applied one by one (:meth:`apply`). The cyclic collector is paused meanwhile
        (:mod:`wheel_engine.gcpause`): none of it awaits."""
        if not isinstance(requests, list | tuple):
            requests = list(requests)
        instant = self._commits.instant  # the commit is done at once: nothing to encode
        with gc_paused(len(requests)):
            fresh = None if self.tracing else self._fresh(check, requests, now, not instant)
            if fresh is not None:
                return self._apply_fresh(*fresh, instant)
            checked = check.batch(requests, now)
            apply = self.apply
            applied = [apply(request) for request in checked]
            infos = [timer.info() for timer, _ in applied]  # as scheduled, before any firing
        if instant:
            if self._events.active:
                made = [timer for timer, change in applied if change is not None]
                self._emit_scheduled(made, self._clock.time())
            return infos, None
        return infos, self.make_durable(applied)

    def _fresh(
        self, check: RequestChecker, requests: Requests, now: float, durable: bool
    ) -> tuple[list[Timer], list[Row]] | None:
        """One pass over a batch of new keys: each request checked, its timer and (``durable``)
        its journal row built (nothing is put anywhere yet), or None for a batch the general
        path takes. Raises as :meth:`RequestChecker.batch` would, before anything changes. The
        batch's head of bare requests skips the checker (:func:`bare_head`: a bare one is
        never bad); from the first other request on, each goes through it."""
        keys, handlers = self._keys, self._table.handlers
        serial, version = keys.next_serial, self.next_version
        made, rows = bare_head(requests, handlers, now, (keys, serial, version), durable)
        serial += len(made)
        version += len(made)
        if len(made) < len(requests):
            timers, given = self._timers, set[str]()
            for valid in check.each(requests[len(made) :] if made else requests, now):
                name, number = valid.key, 0
                if name is None:
                    name, number = keys.prefix, serial  # the timer keeps its serial unspelled
                    serial += 1
                elif name in timers or name in given:
                    return None  # nothing taken: the general path numbers the keys again
                else:
                    given.add(name)
                handler, due = valid.handler, valid.due
                made.append(Timer(name, version, handler, due, valid.payload, serial=number))
                if durable:
                    rows.append(schedule_row(made[-1].key, version, handler, due, valid.data, now))
                version += 1
        keys.skip_to(serial)  # past this batch's keys
        return made, rows

    def _apply_fresh(
        self, made: list[Timer], rows: list[Row], instant: bool
    ) -> tuple[list[TimerInfo], Coroutine[Any, Any, None] | None]:
        """:meth:`_place` :meth:`_fresh`'s timers: their infos, the commit to await (or None)."""
        if not made:
            return [], None
        self.next_version = made[-1].version + 1
        self.place_new(made)
        infos = [timer.info() for timer in made]  # as scheduled, before any firing
        if not instant:
            return infos, self._commit_fresh(made, rows)
        self._emit_scheduled(made, self._clock.time())
        return infos, None

    async def _commit_fresh(self, made: list[Timer], rows: list[Row]) -> None:
        keys = [timer.key for timer in made]
        await self._commits.commit_rows(rows, keys, undo=self._undo_fresh, subject=made)
        self._emit_scheduled(made, self._clock.time())

    def _undo_fresh(self, made: list[Timer]) -> None:
        for timer in reversed(made):
            self._undo_schedule(timer, None)

    def _undo_schedules(self, changes: list[Change]) -> None:
        for _, timer, previous in changes[::-1]:  # not reversed(): mypyc fails on it here
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
        if not self._commits.instant:  # in memory nothing is encoded or awaited for it
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
        ``TimerNotFound`` if there is no such timer, ``EngineError`` if it is not DEAD."""
        dead = self._table.timers.get(key)
        if dead is None:
            raise TimerNotFound(key)
        if dead.state is not DEAD:
            raise EngineError(f"timer {key!r} is {dead.state.value}, not DEAD")
        version = self.next_version
        fresh = Timer(dead.key_base, version, dead.handler, due, dead.payload, serial=dead.serial)
        self.next_version = version + 1
        fresh.packed = dead.packed
        fresh.trace = (self.tracing and self.tracing.get()) or dead.trace  # tracing (#29)
        fresh.last_error = dead.last_error  # kept for reading; attempts start again at 0
        fresh.updated_at = now
        if self._place(fresh, dead):
            self._arm()
        info = fresh.info()
        record = Redrive(dead.key, dead.version, fresh.version, due, now, fresh.trace)  # at once
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
