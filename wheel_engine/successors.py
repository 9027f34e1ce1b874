"""Timers committed in the same commit as their predecessor's attempt (recurring, #25).

A handler spec may carry a successor (:attr:`~wheel_engine.handlers.HandlerSpec.successor`,
recurring's occurrence handlers only): given the timer whose attempt is being committed, it
says which timer must exist from that attempt on (the next occurrence), or None. While a
:class:`Successors` is installed in the start queue (``StartQueue.successors``: while the
engine has a recurrence), each start group asks its timers' specs, and:

- **insert if absent, by key**: a key the table knows, in any state, is left as it is. That is
  what keeps a re-run after a crash (the attempt again, its successor committed already, so
  recovered) or a retry from creating it twice;
- on SQLite its ``Schedule`` record goes into the group's one attempt commit: the attempt and
  its successor are durable together or neither is. Its version is taken from the scheduler's
  counter as the commit is submitted, so any later schedule of the key has a higher one and
  wins in the journal as in memory. Once the commit is done (before any handler of the group
  starts) the timer enters the table and wheel by the scheduler's placing step, unless such a
  later schedule took the key meanwhile; a failed commit places nothing (the group is given
  back, and plans its successors again when it starts again);
- in memory (the commits are done at once) it is placed as the group is taken.

Guarantee: a successor is computed without I/O, from memory alone; not installed on PostgreSQL
(there the occurrence handler commits its successor itself). A start group without it pays one
attribute test (``StartQueue.take``); with it, a lookup of each timer's spec.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
from collections.abc import Iterable
from typing import Any

from journal import Record, Schedule
from wheel_engine.clock import Clock
from wheel_engine.commits import Commits
from wheel_engine.events import EventBus
from wheel_engine.payload import encode_payload
from wheel_engine.scheduling import Scheduler
from wheel_engine.timer import Timer
from wheel_engine.timers import TimerTable

__all__ = ["Successors"]

_ANY_SIZE = float("inf")  # a successor's payload was accepted once (by its recurrence)


class Successors:
    """Plans, commits and places the successors of start groups; see the module docstring."""

    def __init__(
        self,
        table: TimerTable,
        scheduler: Scheduler,
        commits: Commits,
        events: EventBus,
        clock: Clock,
    ) -> None:
        self._table = table
        self._scheduler = scheduler
        self._commits = commits
        self._events = events
        self._clock = clock
        self._planned: set[str] = set()  # successor keys whose commit is in flight

    def plan(self, inline: list[Timer], pooled: list[Timer]) -> list[Timer] | None:
        """The successors of a group just taken that are to be committed with its attempts
        (None if there are none). In memory they are placed at once, and None is returned."""
        handlers = self._table.handlers
        timers = self._table.timers
        planned = self._planned
        scheduler = self._scheduler
        made: list[Timer] | None = None
        for timer in itertools.chain(inline, pooled):
            successor = handlers[timer.handler].successor
            if successor is None:
                continue
            wanted = successor(timer)
            if wanted is None or wanted.key in timers or wanted.key in planned:
                continue
            version = scheduler.next_version
            scheduler.next_version = version + 1
            new = Timer(wanted.key, version, wanted.handler, wanted.due, wanted.payload)
            new.trace = wanted.trace
            if made is None:
                made = []
            made.append(new)
            planned.add(new.key)
        if made is not None and self._commits.instant:
            self._place(made)
            return None
        return made

    def submit(self, records: list[Record], made: list[Timer] | None) -> asyncio.Future[Any]:
        """Submit a group's attempt ``records`` with the ``Schedule`` records of its planned
        successors ``made``, in one commit; they are placed once it is done."""
        if made is None:
            return self._commits.submit(records)
        now = self._clock.time()
        for timer in made:
            data = None if timer.payload is None else encode_payload(timer.payload, _ANY_SIZE)[0]
            records.append(
                Schedule(timer.key, timer.version, timer.handler, timer.due, data, now, timer.trace)
            )
        committed = self._commits.submit(records)
        # added first: it runs before the dispatcher's callback starts the group's handlers
        committed.add_done_callback(functools.partial(self._committed, made))
        return committed

    def _committed(self, made: list[Timer], future: asyncio.Future[Any]) -> None:
        if future.cancelled() or future.exception() is not None:
            self._planned.difference_update(timer.key for timer in made)
            return  # none of it was written: the group starts again, and plans again
        self._place(made)

    def _place(self, made: Iterable[Timer]) -> None:
        timers = self._table.timers
        place = self._scheduler._place  # the one placing step of every new version
        arm = False
        placed = []
        for timer in made:
            self._planned.discard(timer.key)
            if timer.key in timers:
                continue  # a later schedule took the key (a higher version: it wins)
            arm = place(timer, None) or arm
            placed.append(timer)
        if arm:
            self._scheduler._arm()
        events = self._events
        if events.active:
            now = self._clock.time()
            for timer in placed:
                events.scheduled(timer, now)
