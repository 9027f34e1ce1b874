"""The group-commit writer: one task, one aiosqlite connection, one transaction per batch.

``submit`` only appends encoded rows to a pending list and returns a future. The writer task
takes *everything* pending as one batch, writes it in one transaction (a few multi-row INSERTs:
:mod:`journal.inserts`), commits, and resolves the batch's futures. Whatever is submitted while
that commit is in flight waits for the next batch, so N concurrent submitters cost about
``N / batch_size`` commits (one fsync each with ``durability="full"``), not N.

Sequence numbers are assigned by the writer at commit time (``last_seq + 1 ...``), so seqs are
dense and increase forever, also across compaction (which deletes every row, including the
newest, and would otherwise let SQLite reuse rowids). Each row is sealed there too, with a
checksum over its seq, kind and body (:func:`journal.codec.seal_params`), and after each commit
the new last seq goes to the journal's high-water mark (:mod:`journal.watermark`).

If a transaction fails (disk full, read-only file, I/O error) it is rolled back, each of its
futures gets a :class:`~journal.errors.JournalError`, none of its records is written, and the
writer goes on with the next batch.

Jobs (compaction's write) run through the same task, between batches, in their own transaction.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import sqlite3
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeVar

from journal.errors import JournalError
from journal.inserts import insert_sealed
from journal.schema import raise_for
from journal.watermark import HighWaterMark

__all__ = ["GroupCommitWriter"]

logger = logging.getLogger(__name__)

T = TypeVar("T")
_Future: Final = asyncio.Future  # a commit's future (the C implementation asyncio uses)
Job = Callable[[Any], Awaitable[Any]]


class GroupCommitWriter:
    """Owns the writable connection. All methods must be called on the event loop's thread."""

    def __init__(
        self,
        conn: Any,  # aiosqlite.Connection (untyped package)
        path: str,
        *,
        last_seq: int,
        tail_records: int,
        on_commit: Callable[[int, float], None],
        mark: HighWaterMark | None = None,
    ) -> None:
        self._conn = conn
        self._path = path
        self._loop = asyncio.get_running_loop()
        self.last_seq = last_seq  #: highest committed seq
        self.tail_records = tail_records  #: committed records after the snapshot
        self._on_commit = on_commit
        self._mark = mark
        # The pending rows, as two lists rather than one of (kind, body) tuples: a tuple per
        # schedule() alive until its commit is one more object for each collection to walk.
        self._kinds: list[int] = []
        self._bodies: list[bytes] = []
        self._waiters: list[asyncio.Future[None]] = []
        self._jobs: collections.deque[tuple[Job, asyncio.Future[Any]]] = collections.deque()
        self._wake = asyncio.Event()
        self._in_flight = False
        self._batch: list[asyncio.Future[None]] = []  # the waiters of the commit in flight
        self._closing = False
        self._failed: BaseException | None = None
        self._task = self._loop.create_task(self._run(), name=f"journal-writer:{path}")

    # -- called by the journal ---------------------------------------------------------------

    def submit(self, rows: list[tuple[int, bytes]]) -> asyncio.Future[None]:
        """Queue ``(kind, body)`` rows for the next batch; the future resolves once committed."""
        fut = self._waiter()
        kinds, bodies = self._kinds, self._bodies
        for kind, body in rows:
            kinds.append(kind)
            bodies.append(body)
        return fut

    def submit_one(self, kind: int, body: bytes) -> asyncio.Future[None]:
        """:meth:`submit` of one row, with no list or tuple made for it."""
        fut = self._waiter()
        self._kinds.append(kind)
        self._bodies.append(body)
        return fut

    def _waiter(self) -> asyncio.Future[None]:
        """A new waiter of the next batch (raises if closed), the task woken for the first."""
        if self._closing or self._failed is not None:
            raise JournalError(f"journal is closed: {self._path}")
        # Not loop.create_future(): the default loop's is an interpreted frame around this
        # same constructor, on every schedule().
        fut: asyncio.Future[None] = _Future(loop=self._loop)
        waiters = self._waiters
        # Only the first waiter of a batch wakes the task: the task clears its event only when
        # it finds no waiter, so later ones find it set. (Not ``Event.is_set``: it is
        # interpreted, a Python call on every schedule.)
        if not waiters:
            self._wake.set()
        waiters.append(fut)
        return fut

    def run_job(self, job: Callable[[Any], Awaitable[T]]) -> asyncio.Future[T]:
        """Run ``job(conn)`` on the writer's connection between batches; commit is the job's."""
        if self._closing or self._failed is not None:
            raise JournalError(f"journal is closed: {self._path}")
        fut: asyncio.Future[T] = self._loop.create_future()
        self._jobs.append((job, fut))
        self._wake.set()
        return fut

    def busy(self) -> bool:
        return bool(self._waiters or self._jobs or self._in_flight)

    @property
    def stopped(self) -> bool:
        """The task has ended (closed, cancelled or crashed): nothing more will be committed."""
        return self._task.done()

    async def close(self) -> None:
        """Commit what is pending, then stop the task. Idempotent."""
        self._closing = True
        self._wake.set()
        try:
            await asyncio.shield(self._task)
        except asyncio.CancelledError:
            if not self._task.cancelled():  # our caller is being cancelled, not the writer
                raise
        except Exception:  # already reported to the futures and the log
            pass

    # -- the task ----------------------------------------------------------------------------

    async def _run(self) -> None:
        try:
            while True:
                if self._waiters:
                    await self._commit_batch()
                elif self._jobs:
                    await self._run_job(*self._jobs.popleft())
                elif self._closing:
                    return
                else:
                    self._wake.clear()
                    await self._wake.wait()
        except BaseException as exc:  # cancelled, or a bug: nobody may wait forever
            self._failed = exc
            err = JournalError(f"journal writer stopped ({exc!r}): {self._path}")
            # The batch in flight, if any, may or may not have been committed: say so.
            lost = JournalError(
                f"journal writer stopped during a commit ({exc!r}); its records may or may not "
                f"be committed: {self._path}"
            )
            for fut in self._batch:
                if not fut.done():
                    fut.set_exception(_copy(lost))
            for fut in self._waiters:
                if not fut.done():
                    fut.set_exception(_copy(err))
            for _, fut in self._jobs:
                if not fut.done():
                    fut.set_exception(_copy(err))
            self._waiters, self._kinds, self._bodies = [], [], []
            self._jobs.clear()
            if not isinstance(exc, asyncio.CancelledError):
                logger.error("journal writer for %s stopped", self._path, exc_info=exc)
            raise

    async def _commit_batch(self) -> None:
        kinds, bodies, waiters = self._kinds, self._bodies, self._waiters
        self._kinds, self._bodies, self._waiters = [], [], []
        count = len(bodies)
        if not count:  # flush() on an idle writer: nothing to write
            _resolve(waiters)
            return
        self._batch = waiters
        self._in_flight = True
        start = time.perf_counter()
        try:
            await insert_sealed(self._conn, self.last_seq + 1, kinds, bodies)
            await self._conn.commit()
        except Exception as exc:
            self._batch = []
            await self._rollback()
            logger.warning("journal commit of %d records failed (%s): %s", count, exc, self._path)
            err = _as_journal_error(exc, self._path, f"committing {count} records")
            for fut in waiters:
                if not fut.done():
                    fut.set_exception(_copy(err))
            return
        finally:  # on cancellation self._batch stays set, for _run to fail those futures
            self._in_flight = False
        self._batch = []
        seconds = time.perf_counter() - start
        self.last_seq += count
        self.tail_records += count
        if self._mark is not None:
            self._mark.advance(self.last_seq)
        _resolve(waiters)
        try:
            self._on_commit(count, seconds)
        except Exception:
            logger.exception("journal on_commit hook failed")

    async def _run_job(self, job: Job, fut: asyncio.Future[Any]) -> None:
        self._in_flight = True
        try:
            result = await job(self._conn)
        except Exception as exc:
            await self._rollback()
            if not fut.done():
                fut.set_exception(_as_journal_error(exc, self._path, "compacting"))
        else:
            if not fut.done():
                fut.set_result(result)
        finally:
            self._in_flight = False

    async def _rollback(self) -> None:
        try:
            await self._conn.rollback()
        except Exception:  # the connection may be unusable; the next batch will say so
            logger.warning("journal rollback failed: %s", self._path, exc_info=True)


def _resolve(waiters: list[asyncio.Future[None]]) -> None:
    for fut in waiters:
        # Rather than asking each future done() first (few are ever cancelled); not
        # contextlib.suppress, which would make a context manager per future.
        try:  # noqa: SIM105
            fut.set_result(None)
        except asyncio.InvalidStateError:  # a cancelled await does not un-submit its records
            pass


def _as_journal_error(exc: BaseException, path: str, doing: str) -> JournalError:
    if isinstance(exc, JournalError):
        return exc
    if isinstance(exc, sqlite3.Error):
        err = raise_for(exc, path, doing)
    else:
        err = JournalError(f"journal error ({exc}) while {doing}: {path}")
    err.__cause__ = exc
    return err


def _copy(err: JournalError) -> JournalError:
    """One exception object per future (a shared one would collect every raiser's traceback)."""
    new = type(err).__new__(type(err))
    new.__dict__.update(err.__dict__)
    new.args = err.args
    new.__cause__ = err.__cause__
    return new
