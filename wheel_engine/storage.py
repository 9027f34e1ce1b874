"""The storage interface: the calls whose meaning differs between the SQLite journal and the
PostgreSQL store, and the SQLite side's adapter.

The SQLite journal is a log: the engine decides everything (versions, whether an attempt may
start, how a cancel ends) and writes records of what it decided. The PostgreSQL store is the
authority several nodes share: it assigns versions, may refuse an attempt (another node
claimed it, the partition moved, it is not due by the database's clock), decides how a cancel
ends, and fences outcomes by the claim's epoch. So the engine's parts talk to these protocols:

- :class:`Storage`: the public calls that change timers (schedule, cancel, redrive) and
  ``lookup``. :class:`wheel_engine.local_storage.LocalStorage` is the SQLite (and in-memory)
  side: the existing :class:`~wheel_engine.scheduling.Scheduler` and commit path, unchanged;
  the PostgreSQL side is :class:`wheel_engine.nodes.scheduler.NodeScheduler`.
- :class:`RecordSink`: what :class:`~wheel_engine.commits.Commits` writes the firing path's
  records to (attempts, acks, retries, deaths): a ``journal.Journal``, the PostgreSQL sink
  (:mod:`wheel_engine.nodes.sink`), which turns them into compare-and-set statements, or
  :data:`NULL_SINK` in memory, which keeps nothing: each of its commits is done at once.
- :class:`RowSink`: a record sink that also takes rows the engine encoded itself (the SQLite
  schedule paths): the journal, and :data:`NULL_SINK`. A node's schedules go to its store
  (:class:`~wheel_engine.nodes.scheduler.NodeScheduler`), so the node's sink is no row sink.
- :class:`Claims`: what an attempt commit answers when the store may refuse attempts. The
  SQLite journal answers None (every attempt written is claimed); the starter hands each timer
  of the group to :meth:`Claims.undo_unless_claimed` and runs only those that were claimed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from wheel_engine.model import CancelResult, TimerInfo

if TYPE_CHECKING:
    from journal import Record
    from wheel_engine.timer import Timer
    from wheel_engine.validation import CheckedRequest

__all__ = ["NULL_SINK", "Claims", "NullSink", "RecordSink", "RowSink", "Storage"]


class Storage(Protocol):
    """The public calls that change timers, and ``lookup``. Inputs are validated already.

    Each returns once its change is durable (committed to the journal or the database).
    """

    async def schedule(self, request: CheckedRequest) -> TimerInfo: ...

    async def schedule_many(
        self, requests: Iterable[Mapping[str, Any]], now: float
    ) -> list[TimerInfo]:
        """Check every request (one bad one rejects all, nothing changed), then schedule."""
        ...

    async def cancel(self, key: str, version: int | None) -> CancelResult: ...

    async def redrive(self, key: str, due: float, now: float) -> TimerInfo: ...

    async def lookup(self, key: str, now: float) -> TimerInfo | None: ...


class Claims(Protocol):
    """An attempt commit's answer from a store that may refuse attempts (PostgreSQL)."""

    def undo_unless_claimed(self, timer: Timer) -> bool:
        """Settle ``timer``'s attempt, charged by the starter, by what the store answered.

        True: the attempt was claimed; ``timer`` holds the store's count of attempts and the
        caller must run it now. False: it was not claimed, and before returning this has undone
        it for good: the charge is taken back (``Timer.uncharge``) unless the timer ended
        meanwhile, and the timer is back in the wheel (not due yet by the store's clock), or
        given back to the store, or out of the table (claimed elsewhere, replaced, or its
        partition lost). Asked once per timer of the group, in one synchronous step."""
        ...


class RecordSink(Protocol):
    """Where :class:`~wheel_engine.commits.Commits` writes the firing path's records."""

    @property
    def path(self) -> str: ...

    @property
    def tail_records(self) -> int:
        """Records written since the last compaction (0 where none is due: see ``compact``)."""
        ...

    def submit(self, records: list[Record]) -> asyncio.Future[Any]:
        """Write ``records``; the future's result is None or, for attempts, :class:`Claims`."""
        ...

    def busy(self) -> bool: ...

    async def flush(self) -> None: ...

    async def close(self) -> None: ...

    async def compact(self, *, retention: float, now: float, max_retained: int) -> Any:
        """Bound what the store holds: compaction (SQLite), pruning (PostgreSQL)."""
        ...


class RowSink(RecordSink, Protocol):
    """A :class:`RecordSink` that takes rows the engine encoded already (``journal.Journal``)."""

    def submit_rows(self, rows: list[tuple[int, bytes]]) -> asyncio.Future[None]:
        """Write encoded rows (the schedule, cancel and redrive commits)."""
        ...

    def submit_row(self, kind: int, body: bytes) -> asyncio.Future[None]:
        """:meth:`submit_rows` of one row, given apart (``schedule()``'s common case)."""
        ...


class NullSink:
    """The in-memory engine's sink: it keeps nothing, so every commit is done at once.

    Each write returns a future that is already done (no attempt is refused: the result is
    None), nothing is ever due for compaction, and flushing or closing it has nothing to wait
    for. ``Commits`` knows it by identity (:data:`NULL_SINK`) and lets the hot paths skip what
    would be handed to nowhere (``Commits.instant``)."""

    __slots__ = ()

    path = ":memory:"
    tail_records = 0

    def submit(self, records: list[Record]) -> asyncio.Future[Any]:
        return _done()

    def submit_rows(self, rows: list[tuple[int, bytes]]) -> asyncio.Future[None]:
        return _done()

    def submit_row(self, kind: int, body: bytes) -> asyncio.Future[None]:
        return _done()

    def busy(self) -> bool:
        return False

    async def flush(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def compact(self, *, retention: float, now: float, max_retained: int) -> None:
        return None


#: The one :class:`NullSink`.
NULL_SINK: RowSink = NullSink()


def _done() -> asyncio.Future[None]:
    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    future.set_result(None)
    return future
