"""``Journal``: the engine's handle on one journal file.

Writable: holds the single-writer lock and one aiosqlite connection owned by the group-commit
writer task. Bulk reads (recovery, compaction's fold, history, check) open their own read-only
``sqlite3`` connection in a worker thread: through aiosqlite, the decode and fold would run on
the event loop's thread; in a worker thread they leave the loop free (between GIL switches) and
share one synchronous implementation with the read-only journal.
Read-only: no lock, no writer, only those reads.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, Literal, overload

import aiosqlite

from journal import codec
from journal.compaction import CompactionResult, compact
from journal.errors import JournalError
from journal.lock import WriterLock
from journal.meta import MetaInfo
from journal.reader import CheckReport, JournalInfo, check_sync, history_sync, info_sync, row_sync
from journal.records import Record
from journal.recovery import Progress, Recovered, recover_sync
from journal.schema import (
    connect_ro,
    create_file,
    ensure_schema,
    raise_for,
    read_meta,
    secure_sidecars,
)
from journal.state import RowFactory, RowT, TimerRow
from journal.watermark import HighWaterMark, read_mark, verify_mark
from journal.writer import GroupCommitWriter

__all__ = ["Durability", "Journal"]

logger = logging.getLogger(__name__)

Durability = Literal["full", "normal"]
_SYNCHRONOUS: dict[str, str] = {"full": "FULL", "normal": "NORMAL"}
#: WAL is truncated back to this size after a checkpoint.
_WAL_LIMIT = 8 * 1024 * 1024


def _check_ro(path: str) -> MetaInfo:
    """A read-only open checks that the file is a journal it can read. The high-water mark is
    checked by what reads the records (recover, check), so that ``check`` can report a lost
    tail among the other problems instead of failing to open."""
    con = connect_ro(path)
    try:
        return read_meta(con, path)
    finally:
        con.close()


class Journal:
    """An open journal. Create with :meth:`Journal.open`; close with :meth:`close`."""

    def __init__(
        self,
        path: str,
        *,
        readonly: bool,
        durability: Durability,
        meta: MetaInfo,
        lock: WriterLock | None,
        conn: Any,
        mark: HighWaterMark | None = None,
    ) -> None:
        self.path = path
        self.readonly = readonly
        self.durability = durability
        #: Called after each commit with ``(batch_size, seconds)``: a metrics hook. Exceptions
        #: it raises are logged and ignored.
        self.on_commit: Callable[[int, float], None] | None = None
        #: Called after each commit, before ``on_commit``: the owner's own hook (the engine
        #: checks there whether to compact, once per batch rather than once per awaited call).
        #: Kept apart from ``on_commit`` so that a metrics hook set there does not replace it.
        self.after_commit: Callable[[], None] | None = None
        self._meta = meta
        self._lock = lock
        self._conn = conn
        self._mark = mark
        self._closed = False
        self._compacting = asyncio.Lock()
        self._writer: GroupCommitWriter | None = None
        if conn is not None:
            self._writer = GroupCommitWriter(
                conn,
                path,
                last_seq=meta.max_seq,
                tail_records=meta.tail_records,
                on_commit=self._committed,
                mark=mark,
            )
        #: :meth:`submit` for rows encoded already: ``(kind, body)`` as :func:`journal.codec.encode`
        #: (or :func:`~journal.codec.schedule_row`) makes them. Not checked again: the caller
        #: guarantees each body decodes to its kind's shape (the engine's schedule paths build
        #: them from validated fields, and skip a second check per row). Every write passes
        #: through here, :meth:`submit`'s too, or through :attr:`submit_row` (``schedule()``'s
        #: common case); the rest is as :meth:`submit` says (closed: the
        #: writer refuses, as this journal's :meth:`close` closes it first thing). It is the
        #: writer's own method, not one of ours calling it: no extra frame on every
        #: ``schedule()``.
        self.submit_rows: Callable[[list[tuple[int, bytes]]], asyncio.Future[None]] = (
            self._refuse_rows if self._writer is None else self._writer.submit
        )
        #: :attr:`submit_rows` of one row, ``(kind, body)`` given apart (no list, no tuple).
        self.submit_row: Callable[[int, bytes], asyncio.Future[None]] = (
            self._refuse_row if self._writer is None else self._writer.submit_one
        )

    # -- opening -----------------------------------------------------------------------------

    @classmethod
    async def open(
        cls,
        path: str | os.PathLike[str],
        *,
        durability: Durability = "full",
        readonly: bool = False,
    ) -> Journal:
        """Open (writable: create if missing) the journal at ``path``.

        Raises :class:`JournalLocked` when another writer holds it, :class:`JournalError` for a
        file that is not a journal, a journal from a newer wheel-engine, or a missing file when
        ``readonly``, and :class:`JournalCorrupt` for a damaged ``meta`` or (writable) a journal
        that lost committed records (its high-water mark is above its newest seq; :meth:`recover`
        and :meth:`check` say so on a read-only journal). A writable open migrates a schema-1
        journal in place (:mod:`journal.migration`); a read-only one reads it as it is.
        """
        spath = os.fspath(path)
        if not spath or spath == ":memory:" or spath.startswith("file:"):
            raise ValueError(f"a journal needs a file path, not {spath!r}")
        if durability not in _SYNCHRONOUS:
            raise ValueError(f"durability must be 'full' or 'normal', not {durability!r}")
        if readonly:
            meta = await asyncio.to_thread(_check_ro, spath)
            return cls(spath, readonly=True, durability=durability, meta=meta, lock=None, conn=None)
        lock = WriterLock(spath)
        lock.acquire()
        conn: Any = None
        mark: HighWaterMark | None = None
        try:
            meta, mark = await asyncio.to_thread(_prepare, spath)
            try:
                conn = await aiosqlite.connect(spath)
                await conn.execute(f"PRAGMA synchronous = {_SYNCHRONOUS[durability]}")
                await conn.execute("PRAGMA busy_timeout = 5000")
                await conn.execute(f"PRAGMA journal_size_limit = {_WAL_LIMIT}")
                cur = await conn.execute("PRAGMA journal_mode")
                (mode,) = await cur.fetchone()
                if str(mode).lower() != "wal":
                    raise JournalError(f"journal is not in WAL mode ({mode}): {spath}")
            except sqlite3.Error as exc:
                raise raise_for(exc, spath, "opening") from exc
            secure_sidecars(spath)
            return cls(
                spath,
                readonly=False,
                durability=durability,
                meta=meta,
                lock=lock,
                conn=conn,
                mark=mark,
            )
        except BaseException:
            if mark is not None:
                mark.close()
            if conn is not None:
                try:
                    await conn.close()
                except Exception:
                    logger.debug("closing after a failed open", exc_info=True)
            lock.release()
            raise

    # -- properties --------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def tail_records(self) -> int:
        """Records appended since the last snapshot (drives auto-compaction)."""
        if self._writer is not None:
            return self._writer.tail_records
        return self._meta.tail_records

    @property
    def last_seq(self) -> int:
        """The highest committed seq (as of open, for a read-only journal)."""
        if self._writer is not None:
            return self._writer.last_seq
        return self._meta.max_seq

    def busy(self) -> bool:
        """Records waiting, a commit in flight, or a compaction write queued."""
        return self._writer is not None and self._writer.busy()

    # -- writing -----------------------------------------------------------------------------

    def submit(self, records: Sequence[Record]) -> asyncio.Future[None]:
        """Queue ``records`` for the next group commit; the future resolves once committed.

        Must be called on the event loop. Raises ``TypeError`` at once for a malformed record
        (nothing of this call is queued then) and :class:`JournalError` when the journal is
        closed or read-only. The future gets a :class:`JournalError` if the transaction fails;
        then none of that transaction's records is written. Cancelling an ``await`` of the
        future does not withdraw the records.
        """
        return self.submit_rows(codec.encode_many(records))

    def _refuse_rows(self, rows: list[tuple[int, bytes]]) -> asyncio.Future[None]:
        """``submit_rows`` of a read-only journal: raises :class:`JournalError`."""
        return self._writable().submit(rows)

    def _refuse_row(self, kind: int, body: bytes) -> asyncio.Future[None]:
        """``submit_row`` of a read-only journal: raises :class:`JournalError`."""
        return self._writable().submit_one(kind, body)

    async def flush(self) -> None:
        """Wait until everything submitted so far is committed (or has failed)."""
        if self._writer is None or self._closed or self._writer.stopped:
            return  # a stopped writer has already failed every future it still held
        await asyncio.shield(self._writer.submit([]))

    def _writable(self) -> GroupCommitWriter:
        if self._closed:
            raise JournalError(f"journal is closed: {self.path}")
        if self._writer is None:
            raise JournalError(f"journal is opened read-only: {self.path}")
        return self._writer

    def _committed(self, batch: int, seconds: float) -> None:
        owner = self.after_commit
        if owner is not None:
            owner()
        hook = self.on_commit
        if hook is not None:
            hook(batch, seconds)

    # -- reading -----------------------------------------------------------------------------

    @overload
    async def recover(self, progress: Progress | None = None) -> Recovered[TimerRow]: ...

    @overload
    async def recover(
        self, progress: Progress | None, make: RowFactory[RowT]
    ) -> Recovered[RowT]: ...

    async def recover(
        self, progress: Progress | None = None, make: RowFactory[Any] = TimerRow
    ) -> Recovered[Any]:
        """Rebuild the live state from the snapshot and the tail, each timer's row built by
        ``make`` (:func:`journal.recovery.recover_sync`).

        ``progress(done_rows, total_rows)`` is called on the event loop every ~50k rows.
        RUNNING timers come back PENDING (their attempt was interrupted; attempts are kept).
        """
        self._check_open()
        cb: Progress | None = None
        if progress is not None:
            loop = asyncio.get_running_loop()
            user = progress

            def cb(done: int, total: int) -> None:
                loop.call_soon_threadsafe(user, done, total)

        return await asyncio.to_thread(recover_sync, self.path, cb, make)

    async def history(self, key: str) -> list[tuple[int, Record]]:
        """``(seq, record)`` for ``key`` from the tail, in order. The state as of the last
        compaction is :meth:`snapshot_row` (or :meth:`recover`)."""
        self._check_open()
        return await asyncio.to_thread(history_sync, self.path, key)

    async def snapshot_row(self, key: str) -> TimerRow | None:
        """The snapshot's row for ``key`` (the state folded at the last compaction)."""
        self._check_open()
        return await asyncio.to_thread(row_sync, self.path, key)

    async def info(self) -> JournalInfo:
        """Summary numbers (seqs, counts, sizes) for ``status``."""
        self._check_open()
        return await asyncio.to_thread(info_sync, self.path)

    async def check(self) -> CheckReport:
        """Integrity check: SQLite's quick_check, every row's checksum and shape, every payload,
        dense seqs and the high-water mark; lists the damage (:func:`journal.reader.check_sync`)."""
        self._check_open()
        return await asyncio.to_thread(check_sync, self.path)

    def _check_open(self) -> None:
        if self._closed:
            raise JournalError(f"journal is closed: {self.path}")

    # -- compaction --------------------------------------------------------------------------

    async def compact(
        self, *, retention: float, now: float, max_retained: int | None = None
    ) -> CompactionResult:
        """Fold the snapshot and every record committed so far into a new snapshot, online.

        Finished timers (SUCCEEDED, CANCELED) last updated before ``now - retention`` are
        dropped, and beyond the newest ``max_retained`` of them (by ``(updated_at, key)``; None:
        no limit); DEAD ones are kept. Records committed meanwhile stay in the tail. Written in
        pieces, group commits passing between them; a crash between two leaves a journal
        compacted up to the last piece written. See :mod:`journal.compaction`.
        """
        writer = self._writable()
        if retention < 0 or retention != retention:
            raise ValueError(f"retention must be >= 0, not {retention!r}")
        if max_retained is not None and max_retained < 0:
            raise ValueError(f"max_retained must be >= 0, not {max_retained!r}")
        async with self._compacting:
            result = await compact(self.path, writer, now - retention, max_retained)
            logger.info(
                "journal compacted: %d live rows, %d records folded, %d timers dropped, %.3fs "
                "(%d pieces, the longest write %.3fs): %s",
                result.live_rows,
                result.removed_records,
                result.dropped_timers,
                result.seconds,
                result.pieces,
                result.longest_write_seconds,
                self.path,
            )
            return result

    # -- closing -----------------------------------------------------------------------------

    async def close(self) -> None:
        """Commit what is pending, close the connection, release the lock. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._writer is not None:
                await self._writer.close()
            if self._conn is not None:
                try:
                    await self._conn.close()
                except Exception:
                    logger.warning("closing the journal failed: %s", self.path, exc_info=True)
        finally:
            if self._mark is not None:
                self._mark.close()
            if self._lock is not None:
                self._lock.release()

    async def __aenter__(self) -> Journal:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        mode = "readonly" if self.readonly else self.durability
        state = "closed" if self._closed else "open"
        return f"<Journal {self.path!r} {mode} {state}>"


def _prepare(path: str) -> tuple[MetaInfo, HighWaterMark | None]:
    """Writable open, in a thread with the lock held: schema (and migration), then the mark."""
    create_file(path)
    mark = read_mark(path)
    meta = ensure_schema(path)
    if meta.journal_id is None:  # pragma: no cover - ensure_schema leaves the current schema
        return meta, None
    verify_mark(mark, meta.journal_id, meta.max_seq, path)
    if mark is not None and mark.journal_id != meta.journal_id:
        logger.warning("replacing the high-water mark of another journal: %s", path)
    return meta, HighWaterMark(path, meta.journal_id, meta.max_seq)
