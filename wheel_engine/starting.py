"""The queue of due timers, and the start groups taken from its head.

Due timers wait in :class:`StartQueue`, still PENDING and not charged. What can start now is
taken from its head as one **group** (:meth:`StartQueue.take`, the one place a queued timer is
charged): up to ``INLINE_BATCH`` plain handlers followed by as many others as there are free
worker slots. The queue's order is kept: the first timer that cannot start stops the group. A
timer still queued is never charged (SPEC guarantee 5).

A **crash suspect** (a timer whose last attempt a crash cut short) is taken alone, and no group
is taken while it is :attr:`StartQueue.alone`. Why: such a timer may be a poison that kills the
process. Had it started in a group, each crash would charge its partners once more (their
attempts share its commit) and take them to DEAD with it, since after each restart the same
group forms at the head of the queue. Alone, its attempt commits with no other, and the next
group commits only after its handler has started: a handler that kills the process at once
charges no one else. One that kills it later, while others run, charges those that really
started.

The queue counts no slot and runs nothing: :class:`~wheel_engine.dispatcher.Dispatcher` says
how much room a group has and runs what it took. Loop thread only.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Final

from journal import Attempt, Record
from wheel_engine.clock import Clock
from wheel_engine.limits import Limits
from wheel_engine.outcomes import Outcomes
from wheel_engine.storage import Claims
from wheel_engine.timer import INTERRUPT_CRASH, QUEUED, Timer
from wheel_engine.timers import RUNNING, TimerTable

if TYPE_CHECKING:
    import asyncio

    from wheel_engine.commits import Commits
    from wheel_engine.successors import Successors

INLINE_BATCH: Final = 1024  # plain handlers run per loop callback before yielding to other work

_new_tuple: Final = tuple.__new__


class StartQueue:
    """Due timers waiting to start, in order, and the groups taken from them; see the module
    docstring. ``ready`` is the queue itself (a limited handler's gate appends to it too)."""

    __slots__ = (
        "_clock",
        "_handlers",
        "_limits",
        "_outcomes",
        "_table",
        "alone",
        "ready",
        "successors",
    )

    def __init__(
        self,
        table: TimerTable,
        outcomes: Outcomes,
        clock: Clock,
        ready: deque[Timer],
        limits: Limits,
    ) -> None:
        self.ready = ready  # due, not started, not charged: waiting to start
        self.alone: Timer | None = None  # the crash suspect starting alone, if any
        self._table = table
        self._handlers = table.handlers
        self._outcomes = outcomes
        self._clock = clock
        self._limits = limits
        #: recurring (#25): timers committed with their predecessor's attempt, while the engine
        #: has a recurrence (:mod:`wheel_engine.successors`); None: a group asks nothing more
        self.successors: Successors | None = None

    def route(self, batch: list[Timer], now: float) -> int:
        """Due timers join the queue in (tick, version) order, uncharged; a limited handler's go
        to its gate (:mod:`wheel_engine.limits`). Returns how many are now ``QUEUED``."""
        handlers = self._handlers
        table = self._table
        ready = self.ready
        limits = self._limits
        gates = limits.gates
        queued = 0
        for timer in batch:
            if timer.due > now:  # float rounding of the tick: never early, try next tick
                table.insert(timer)
                continue
            spec = handlers.get(timer.handler)
            if spec is None:
                table.park(timer)
                continue
            if timer.attempts >= spec.retry.max_attempts:
                # Recovered after its last allowed attempt was interrupted by a crash: that
                # attempt failed, and it was the last one. (Normal retries never get here.)
                self._outcomes.give_up(timer, f"attempt {timer.attempts} was interrupted", now)
                continue
            timer.where = QUEUED
            if not gates or not limits.arrive(timer, now):
                ready.append(timer)
            queued += 1
        if queued:
            table.queued += queued
        return queued

    def take(
        self, free: int, inline_room: int, suspect_may_start: bool
    ) -> tuple[list[Timer], list[Timer]]:
        """Pop the next group off the queue's head and charge it: (plain ones to run on the
        loop, at most ``inline_room``; ones for the ``free`` worker slots).

        A crash suspect is taken only when ``suspect_may_start`` (no other attempt committing
        or starting), and alone. While a handler is limited, :meth:`Limits.admit` is asked right
        before each timer is taken: False ends the group, the timer staying uncharged."""
        ready = self.ready
        handlers = self._handlers
        inline: list[Timer] = []
        pooled: list[Timer] = []
        if self.alone is not None:
            return inline, pooled
        limits = self._limits
        gates = limits.gates  # empty while no handler is limited: nothing more is asked
        now = self._clock.time()
        while ready:
            timer = ready[0]
            if timer.where != QUEUED:  # cancelled or replaced while it waited
                ready.popleft()
                continue
            spec = handlers[timer.handler]
            suspect = timer.interrupt == INTERRUPT_CRASH  # a suspect: it starts alone
            if suspect:
                if inline or pooled or not suspect_may_start:
                    break  # once everything before it has committed and started
                if not spec.inline and not free:
                    break
                to_inline = spec.inline
            elif not pooled and spec.inline:
                if not inline_room:
                    break  # it starts with the next group, once this (or the last) one ran
                to_inline = True
            elif free:
                to_inline = False
            else:
                break
            if gates and not limits.admit(timer):
                break  # not now: it stays queued, uncharged, and its gate starts more later
            ready.popleft()
            timer.charge(now)
            if to_inline:
                inline_room -= 1
                inline.append(timer)
            else:
                free -= 1
                pooled.append(timer)
            if suspect:
                self.alone = timer
                break
            if pooled and not free:
                break  # none after a worker's may start inline: the group is full
        self._table.queued -= len(inline) + len(pooled)
        successors = self.successors
        if successors is not None and successors.at_once:  # in memory: placed as it is taken
            successors.plan(inline, pooled)
        return inline, pooled

    def attempt_records(self, inline: list[Timer], pooled: list[Timer]) -> list[Record]:
        """The group's ``Attempt`` records, for its one commit."""
        now = self._clock.time()
        new = _new_tuple
        return [
            new(Attempt, (timer.key, timer.version, timer.attempts, now))
            for timer in itertools.chain(inline, pooled)
        ]

    def submit_attempts(
        self, commits: Commits, inline: list[Timer], pooled: list[Timer]
    ) -> asyncio.Future[Any]:
        """Submit the group's one commit: its ``Attempt`` records, with its timers' successors
        (:mod:`wheel_engine.successors`), planned here, as the group was just taken. Never
        raises (``Commits.submit``)."""
        records = self.attempt_records(inline, pooled)
        successors = self.successors  # the one test a group pays for successors
        planned = None if successors is None else successors.plan(inline, pooled)
        if planned is None:
            return commits.submit(records)
        assert successors is not None
        return successors.submit(records, planned)

    def claimed(
        self, claims: Claims, inline: list[Timer], pooled: list[Timer]
    ) -> tuple[list[Timer], list[Timer]]:
        """The group's timers whose attempts ``claims`` claimed; the others are undone (see
        :meth:`Claims.undo_unless_claimed`) and give their handler's slot back."""
        kept_inline = [timer for timer in inline if claims.undo_unless_claimed(timer)]
        kept_pooled = [timer for timer in pooled if claims.undo_unless_claimed(timer)]
        self._limits.release_refused(itertools.chain(inline, pooled), kept_inline, kept_pooled)
        return kept_inline, kept_pooled

    def give_back(self, timers: Iterable[Timer], retry_at: float) -> None:
        """The group's attempt commit failed: its timers go back into the wheel, uncharged, due
        at ``retry_at`` at the earliest (unless they ended or were replaced meanwhile)."""
        table = self._table
        current = table.timers
        for timer in timers:
            self._limits.release(timer)
            if timer.state is RUNNING and current.holds(timer):
                timer.uncharge()
                timer.due = max(timer.due, retry_at)
                table.insert(timer)
