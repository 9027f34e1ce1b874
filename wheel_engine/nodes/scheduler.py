"""The public calls on PostgreSQL: the store first, then this node's memory.

:class:`NodeScheduler` is the :class:`~wheel_engine.storage.Storage` of a node. Unlike the
SQLite side (memory first, then committed, undone on failure), every change is made in the
database first, which decides the outcome:

- ``schedule``: the store assigns the version (from a sequence: strictly increasing across
  all nodes, never reused) and applies ``on_conflict`` against the live row, whichever node
  wrote it; the timer then goes into this node's wheel if this node owns its partition and
  its due time is within the loaded horizon (otherwise its owner learns of it through the
  change feed, or the loader reads it in time);
- ``cancel``: a pending timer is CANCELED by one conditional update; one running on any node
  is CANCEL_REQUESTED (its owner cancels the handler's task); a stale version is NOT_FOUND;
- ``redrive``: DEAD to PENDING with a new version;
- ``lookup``: the database's row, whichever node owns it.

Nothing changes in memory when the store raises, so there is nothing to undo.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from journal.postgres import LiveKeyConflict, PostgresStore, StoredTimer, TimerUpsert
from wheel_engine.clock import Clock
from wheel_engine.engine_keys import EngineKeys
from wheel_engine.errors import DuplicateKey, EngineError, TimerNotFound
from wheel_engine.events import EventBus
from wheel_engine.model import CancelResult, TimerInfo
from wheel_engine.nodes.adopting import Adopter, timer_of
from wheel_engine.payload import decode_payload
from wheel_engine.stats import Counters
from wheel_engine.timer import INTERRUPT_CANCEL
from wheel_engine.timers import CANCELED, DEAD, PENDING, RUNNING, TimerTable
from wheel_engine.tracing import SCHEDULING
from wheel_engine.validation import CheckedRequest, RequestChecker
from wheel_engine.workers import WorkerPool

__all__ = ["NodeScheduler", "info_of"]

#: How often a redrive is tried while the row turns DEAD under it (see NodeScheduler.redrive).
REDRIVE_TRIES: Final = 3


def info_of(row: StoredTimer, payload: object = None, decoded: bool = False) -> TimerInfo:
    """``row`` as a :class:`TimerInfo` (its payload decoded unless given)."""
    value = payload if decoded else decode_payload(row.payload)
    return TimerInfo(
        row.key,
        row.version,
        row.handler,
        row.due,
        value,
        row.state,
        row.attempts,
        row.last_error,
    )


class NodeScheduler:
    """A node's :class:`~wheel_engine.storage.Storage` (see the module docstring)."""

    def __init__(
        self,
        store: PostgresStore,
        adopter: Adopter,
        table: TimerTable,
        pool: WorkerPool,
        stats: Counters,
        clock: Clock,
        events: EventBus,
        check: RequestChecker,
    ) -> None:
        self._check = check
        self._store = store
        self._adopter = adopter
        self._table = table
        self._pool = pool
        self._stats = stats
        self._clock = clock
        self._events = events
        self._keys = EngineKeys()  # the keys of requests that name none

    async def schedule(self, request: CheckedRequest) -> TimerInfo:
        return (await self._schedule([request]))[0]

    async def schedule_many(
        self, requests: Iterable[Mapping[str, Any]], now: float
    ) -> list[TimerInfo]:
        if not isinstance(requests, list | tuple):
            requests = list(requests)
        return await self._schedule(self._check.batch(requests, now))

    def store_requests(self, requests: list[CheckedRequest]) -> list[TimerUpsert]:
        """The store's requests for validated ones (keys made for those that have none)."""
        store = self._store
        trace = SCHEDULING.get()  # tracing (#29): the call's context, None when untraced
        return [
            store.request(
                r.key if r.key is not None else self._keys.new(),
                r.handler,
                r.due,
                r.data,
                r.on_conflict,  # type: ignore[arg-type]  # validated: one of ON_CONFLICT
                trace,
            )
            for r in requests
        ]

    async def _schedule(self, requests: list[CheckedRequest]) -> list[TimerInfo]:
        try:
            results = await self._store.schedule_many(self.store_requests(requests))
        except LiveKeyConflict as exc:
            raise DuplicateKey(str(exc)) from exc
        infos: list[TimerInfo] = []
        now = self._clock.time()
        placed = False
        for request, (row, kept) in zip(requests, results, strict=True):
            if kept:
                infos.append(info_of(row))
                continue
            placed = self._adopter.row(row) or placed
            infos.append(info_of(row, request.payload, decoded=True))
            if self._events.active:
                self._events.scheduled(timer_of(row), now)
        if placed:
            self._adopter.arm()
        return infos

    async def cancel(self, key: str, version: int | None) -> CancelResult:
        result = CancelResult(await self._store.cancel(key, version))
        local = self._table.timers.get(key)
        if local is None or (version is not None and local.version != version):
            return result
        if result is CancelResult.CANCELED and local.state is PENDING:
            self._table.unplace(local)
            self._table.finish(local, CANCELED, self._clock.time())
            self._stats.canceled += 1
            if self._events.active:
                self._events.canceled(local, local.updated_at)
        elif result is CancelResult.CANCELED and local.state is RUNNING:
            # Charged here, its claim still in flight (the row was PENDING): the claim is
            # refused and the entry dropped; the cancel is told now, as a pending one's is
            # (recurring goes on after a skipped occurrence by this event, #25).
            self._stats.canceled += 1
            if self._events.active:
                self._events.canceled(local, self._clock.time())
        elif result is CancelResult.CANCEL_REQUESTED and local.state is RUNNING:
            self._pool.interrupt(local, INTERRUPT_CANCEL)  # here at once; others via the feed
        return result

    async def redrive(self, key: str, due: float, now: float) -> TimerInfo:
        # The compare-and-set can miss a row that turns DEAD between it and the lookup (the
        # node that ran it commits its outcome after its own view already says DEAD): a DEAD
        # row is tried again, a few times, before the race is reported.
        for _ in range(REDRIVE_TRIES):
            row = await self._store.redrive(key, at=due, trace=SCHEDULING.get())
            if row is not None:
                break
            current = await self._store.lookup(key)
            if current is None:
                raise TimerNotFound(key)
            if current.state is not DEAD:
                raise EngineError(f"timer {key!r} is {current.state}, not DEAD")
        else:
            raise EngineError(f"timer {key!r} changed while it was redriven")
        self._adopter.rows((row,))
        self._stats.redriven += 1
        if self._events.active:
            self._events.redriven(timer_of(row), now)
        return info_of(row)

    async def lookup(self, key: str, now: float) -> TimerInfo | None:
        row = await self._store.lookup(key)
        return None if row is None else info_of(row)
