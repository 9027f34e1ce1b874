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
- on PostgreSQL it goes with the group's claim (``NodeSink.submit``): inserted, if its key is
  absent, in the claim's transaction and only for a claimed predecessor, its version drawn by
  the database; the node places the rows inserted (an occurrence is in its predecessor's
  partition) before the group's handlers start;
- in memory (the commits are done at once) it is placed as the group is taken.

Guarantee: a successor is computed without I/O, from memory alone. A start group without it
pays a test of ``StartQueue.successors`` where it is taken and where its commit is submitted;
with it, a lookup of each timer's spec.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast

from journal import Record, Schedule
from wheel_engine.clock import Clock
from wheel_engine.commits import Commits
from wheel_engine.events import EventBus
from wheel_engine.handlers import Successor
from wheel_engine.payload import encode_payload
from wheel_engine.scheduling import Scheduler
from wheel_engine.timer import Timer
from wheel_engine.timers import TimerTable

if TYPE_CHECKING:
    from journal.postgres import PostgresStore, SuccessorRow

__all__ = ["Successors"]

_ANY_SIZE = float("inf")  # a successor's payload was accepted once (by its recurrence)


class NodeSink(Protocol):
    """What a node's sink (:class:`wheel_engine.nodes.sink.NodeSink`) offers for successors."""

    store: PostgresStore

    def submit(
        self, records: list[Record], successors: Sequence[SuccessorRow] = ()
    ) -> asyncio.Future[Any]: ...


#: A start group's planned successors: (the predecessor, its successor's schedule).
Planned = list[tuple[Timer, Successor]]


class Successors:
    """Plans, commits and places the successors of start groups; see the module docstring."""

    def __init__(
        self,
        table: TimerTable,
        scheduler: Scheduler,
        commits: Commits,
        events: EventBus,
        clock: Clock,
        shared: bool = False,
    ) -> None:
        #: PostgreSQL: the node's sink (``commits.journal``) claims with successors; it is read
        #: as each group is submitted, since this may be made before the node installs it
        self._shared = shared
        self._table = table
        self._scheduler = scheduler
        self._commits = commits
        self._events = events
        self._clock = clock
        self._planned: set[str] = set()  # successor keys whose commit is in flight

    def plan(self, inline: list[Timer], pooled: list[Timer]) -> Planned | None:
        """The successors of a group just taken that are to be committed with its attempts
        (None if there are none). In memory they are placed at once, and None is returned."""
        handlers = self._table.handlers
        timers = self._table.timers
        planned = self._planned
        made: Planned | None = None
        for timer in itertools.chain(inline, pooled):
            successor = handlers[timer.handler].successor
            if successor is None:
                continue
            wanted = successor(timer)
            if wanted is None or wanted.key in timers or wanted.key in planned:
                continue
            if made is None:
                made = []
            made.append((timer, wanted))
            planned.add(wanted.key)
        if made is not None and self._commits.instant:
            self._place(self._versioned(made))
            return None
        return made

    @property
    def at_once(self) -> bool:
        """In memory: a group's successors are placed by :meth:`plan` as it is taken, with no
        commit to wait for (``StartQueue.take``); else they go with its attempts' commit."""
        return self._commits.instant

    def submit(self, records: list[Record], made: Planned) -> asyncio.Future[Any]:
        """Submit a group's attempt ``records`` with its planned successors ``made``, in one
        commit (never raises, as ``Commits.submit``); they are placed once it is done."""
        if self._shared:
            return self._claim_with(cast(NodeSink, self._commits.journal), records, made)
        timers = self._versioned(made)
        now = self._clock.time()
        for timer in timers:
            records.append(
                Schedule(
                    timer.key, timer.version, timer.handler, timer.due, _packed(timer.payload),
                    now, timer.trace,
                )
            )  # fmt: skip
        committed = self._commits.submit(records)
        # added first: it runs before the dispatcher's callback starts the group's handlers
        committed.add_done_callback(functools.partial(self._committed, timers))
        return committed

    def _versioned(self, made: Planned) -> list[Timer]:
        """The planned successors as new timers, their versions drawn from the scheduler's
        counter (the one every new version of any key comes from)."""
        scheduler = self._scheduler
        timers = []
        for _, wanted in made:
            version = scheduler.next_version
            scheduler.next_version = version + 1
            timer = Timer(wanted.key, version, wanted.handler, wanted.due, wanted.payload)
            timer.trace = wanted.trace
            timers.append(timer)
        return timers

    def _claim_with(
        self, node: NodeSink, records: list[Record], made: Planned
    ) -> asyncio.Future[Any]:
        """PostgreSQL: the claim inserts them (``journal.postgres.firing.attempt``) and the
        sink places the rows inserted; nothing is placed from here."""
        from journal.postgres import SuccessorRow  # not imported by other engines

        partition_of = node.store.partition_of
        rows = [
            SuccessorRow(
                timer.key, s.key, partition_of(s.key), s.handler, s.due, _packed(s.payload),
                s.trace,
            )
            for timer, s in made
        ]  # fmt: skip
        try:
            committed = node.submit(records, rows)
        except Exception as exc:  # closed: failed like any commit of a closed journal
            committed = asyncio.get_running_loop().create_future()
            committed.set_exception(exc)
        committed.add_done_callback(functools.partial(self._claimed, [s.key for _, s in made]))
        return committed

    def _claimed(self, keys: list[str], future: asyncio.Future[Any]) -> None:
        """A claim's answer: its plans are done with, and each successor it really inserted
        (not one another run had inserted already) is ``scheduled``, as on the other engines."""
        self._planned.difference_update(keys)
        if not self._events.active or future.cancelled() or future.exception() is not None:
            return
        timers, placed = self._table.timers, []
        for row in future.result().chained:
            timer = timers.get(row.key)
            if timer is not None and timer.version == row.version:  # as the sink placed it
                placed.append(timer)
        self._announce(placed)

    def _committed(self, made: list[Timer], future: asyncio.Future[Any]) -> None:
        if future.cancelled() or future.exception() is not None:
            self._planned.difference_update(timer.key for timer in made)
            return  # none of it was written: the group starts again, and plans again
        self._place(made)

    def _place(self, made: Iterable[Timer]) -> None:
        timers = self._table.timers
        placed = []
        for timer in made:
            self._planned.discard(timer.key)
            if timer.key not in timers:  # else a later schedule took it (a higher version wins)
                placed.append(timer)
        self._scheduler.place_new(placed)  # the one placing step of every new version
        self._announce(placed)

    def _announce(self, placed: Iterable[Timer]) -> None:
        """Each successor just placed is ``scheduled``, once, as any schedule's timer is."""
        events = self._events
        if events.active:
            now = self._clock.time()
            for timer in placed:
                events.scheduled(timer, now)


def _packed(payload: Any) -> bytes | None:
    return None if payload is None else encode_payload(payload, _ANY_SIZE)[0]
