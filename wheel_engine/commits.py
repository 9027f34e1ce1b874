"""Everything the engine writes to its journal: awaited commits, outcome writes, compaction.

- :meth:`Commits.commit_rows` is the one path for a change the caller waits for (schedule,
  cancel, redrive; :meth:`Commits.commit` encodes records for it). The change is already made in
  memory; if its commit fails, the caller's ``undo`` takes it back out before the caller sees
  the error. ``schedule()``'s common case does the same steps without a coroutine of its own
  (``Scheduler.submit_fresh``/``settle_fresh``), with :meth:`Commits.track`/:meth:`untrack`.
- :meth:`Commits.submit` and :meth:`Commits.write` hand the firing path's records (attempts,
  acks, retries, deaths) to the journal and **never raise**: an exception inside a clock
  callback or a worker would leave every other timer of its batch RUNNING for good. A closed or
  failed journal gives an already-failed future; a record that cannot be encoded (validation
  keeps such keys out, so this is a defence: an error text with a lone surrogate, say) never
  holds back the others: its error text is made encodable (``backslashreplace``) or, if it still
  cannot be written, it alone is left out and logged. Leaving a record out costs what a lost
  ack costs: that timer may fire again after a restart. A failed outcome write is one WARNING
  line naming its first timer, never a payload.
- Compaction starts on its own once history outweighs the live timers (:meth:`maybe_compact`,
  checked after each of the journal's commits and after each awaited commit).

The sink is always there: until a store is installed (and for good in memory) it is
:data:`~wheel_engine.storage.NULL_SINK`, whose commits are done at once. :attr:`Commits.instant`
says so, set once with the sink, so that the hot paths need not build what would go nowhere.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Literal

from journal import Ack, Dead, Record, Retry, codec
from journal.errors import JournalError
from wheel_engine.clock import Clock
from wheel_engine.diagnostics import one_line
from wheel_engine.storage import NULL_SINK
from wheel_engine.timer import Timer, recovered_timer
from wheel_engine.timers import TimerTable

if TYPE_CHECKING:
    from journal import Journal, Recovered
    from wheel_engine.storage import RecordSink, RowSink

logger = logging.getLogger(__name__)


class Commits:
    """The engine's side of its journal; see the module docstring."""

    def __init__(self, table: TimerTable, clock: Clock, *, compact_min_records: int) -> None:
        #: Where records go: a ``journal.Journal``, the PostgreSQL sink
        #: (``wheel_engine.nodes.sink``), or ``NULL_SINK`` (in memory, and before start).
        self.journal: RecordSink = NULL_SINK
        #: Where encoded rows go (the awaited commits): the journal on SQLite, else
        #: ``NULL_SINK`` (a node's schedules go to its store, never through here).
        self.rows: RowSink = NULL_SINK
        #: The sink keeps nothing, every commit is done at once (``NULL_SINK``): set with the
        #: sink, so the hot paths may skip building records and awaiting commits.
        self.instant = True
        self.closing = False  # set by the engine's close(): no compaction starts any more
        self.committing: dict[str, asyncio.Future[None]] = {}  # key -> its schedule's commit
        self.compacting: asyncio.Task[None] | None = None
        self.last_compaction: float | None = None
        self.compact_min_records = compact_min_records
        self._table = table
        self._clock = clock

    def install(self, sink: RecordSink) -> None:
        """Write the firing path's records to ``sink`` from now on (a node's, at its start)."""
        self.journal = sink
        self.instant = sink is NULL_SINK

    def install_journal(self, journal: RowSink) -> None:
        """Write records and rows to ``journal`` from now on (the SQLite journal)."""
        self.install(journal)
        self.rows = journal

    async def open(
        self, path: str, durability: Literal["full", "normal"]
    ) -> tuple[Journal, Recovered[Timer]]:
        """Open and recover the journal at ``path``, and write to it from now on; it is closed
        again if recovery fails."""
        from journal import Journal  # not imported by in-memory engines

        journal = await Journal.open(path, durability=durability)
        try:
            recovered = await journal.recover(functools.partial(_progress, path), recovered_timer)
        except BaseException:
            await journal.close()
            raise
        # Each commit checks for compaction once: schedule()'s common case (Scheduler.
        # settle_fresh) does not, as that check is an interpreted call per schedule.
        journal.after_commit = self.maybe_compact
        self.install_journal(journal)
        return journal, recovered

    async def close(self) -> None:
        """Let a compaction under way end, then flush (acks included) and close the journal."""
        if self.compacting is not None:
            await asyncio.gather(self.compacting, return_exceptions=True)
        journal = self.journal
        try:
            await journal.flush()
        finally:
            await journal.close()

    def busy(self) -> bool:
        """Records are being committed off the loop."""
        return self.journal.busy()

    async def quiesce(self) -> None:
        """Wait for the commits that :meth:`busy` reports."""
        if self.journal.busy():
            await self.journal.flush()

    # ------------------------------------------------------------------ awaited commits
    async def commit(
        self,
        records: list[Record],
        *,
        track: bool = False,
        undo: Callable[[Any], object] | None = None,
        subject: Any = None,
    ) -> None:
        """:meth:`commit_rows` for records (encoded and checked here; a record that cannot be
        encoded is undone and raised like a failed commit). With ``track``, the records' keys
        are tracked."""
        try:
            rows = codec.encode_many(records)
        except BaseException:
            if undo is not None:
                undo(subject)
            raise
        keys = [record.key for record in records] if track else None
        await self.commit_rows(rows, keys, undo=undo, subject=subject)

    async def commit_rows(
        self,
        rows: list[tuple[int, bytes]],
        keys: list[str] | None = None,
        *,
        undo: Callable[[Any], object] | None = None,
        subject: Any = None,
    ) -> None:
        """Commit ``rows`` (encoded records), which describe a change already made in memory,
        and wait for it.

        If the commit fails, ``undo(subject)`` takes the change back out of memory before the
        caller sees the error. Each of ``keys`` (if given) leads to the commit while it is in
        flight, so that ``on_conflict="keep"`` can wait for it (:meth:`wait_committed`).
        ``undo`` and ``subject`` are separate so that an await allocates no closure.

        A caller cancelled while it waits does not withdraw the records (the journal commits
        them anyway) and undoes nothing: the change stands in memory as it will in the journal.
        Only if that commit then also fails do the two differ until the next start; no promise
        was broken, since that caller was never told the change was made. Watching for that
        double fault would cost a callback and a future per call.
        """
        future = None
        try:
            future = self.rows.submit_rows(rows)  # raises if the journal is closed or has failed
            if keys is not None:
                self.track(keys, future)
            await future
        except asyncio.CancelledError:
            raise
        except BaseException:
            if undo is not None:
                undo(subject)
            raise
        finally:
            if keys is not None and future is not None and not future.cancelled():
                self.untrack(keys, future)
        self.maybe_compact()

    def track(self, keys: Iterable[str], future: asyncio.Future[None]) -> None:
        """These keys' schedules commit with ``future`` (see :meth:`wait_committed`)."""
        committing = self.committing
        for key in keys:
            committing[key] = future

    def untrack(self, keys: Iterable[str], future: asyncio.Future[None]) -> None:
        """``future`` is done: these keys no longer lead to it (unless a later commit took
        them over). Not called for a cancelled future: its records are still being written,
        and :meth:`wait_committed` asks the writer for them."""
        committing = self.committing
        for key in keys:
            if committing.get(key) is future:
                del committing[key]

    def in_flight(self, key: str) -> bool:
        """The schedule of ``key`` is committing."""
        return key in self.committing

    async def wait_committed(self, keys: Iterable[str]) -> None:
        """Wait for the in-flight commits of these keys' schedules (raises if one failed)."""
        committing = self.committing
        pending = {committing[key] for key in keys if key in committing}
        if not pending:
            return
        await asyncio.wait(pending)  # never cancels them, whoever else is waiting
        for future in pending:
            if future.cancelled():  # its own caller gave up waiting: ask the writer instead
                await self.rows.flush()
            elif (error := future.exception()) is not None:
                raise error

    # ------------------------------------------------------------------ fire and forget
    def submit(self, records: list[Record]) -> asyncio.Future[Any]:
        """``journal.submit(records)``, except that it never raises (see the module docstring).
        Its result is None, or for attempts a ``wheel_engine.storage.Claims``."""
        return submit_safely(self.journal, records)

    def ack(self, timers: list[Timer], now: float) -> None:
        """:meth:`write` the acks of these timers' attempts (no records made where they would
        go nowhere: a success is the in-memory engine's hottest path)."""
        if not self.instant:
            self.write([Ack(timer.key, timer.version, now) for timer in timers])

    def write(self, records: list[Record]) -> None:
        """Outcome records are batched, not awaited: a lost ack only means firing again."""
        future = self.submit(records)  # never raises: a bad record never stalls the others
        future.add_done_callback(functools.partial(logged_write, records))
        self.maybe_compact()

    # ------------------------------------------------------------------ compaction
    def maybe_compact(self) -> None:
        """Compaction runs on its own once history outweighs the live timers (bounded file).

        The table's ``timers`` holds the live and DEAD timers plus the retention window (purged
        as timers finish), which is what the snapshot will hold: the file stays within about
        three times that, however many timers have finished.
        """
        journal = self.journal
        if self.compacting is not None or self.closing:
            return
        if journal.tail_records > max(self.compact_min_records, 2 * len(self._table.timers)):
            self.compacting = asyncio.ensure_future(self._run_compaction())
            self.compacting.add_done_callback(log_failure)

    async def compact(self) -> None:
        """Rewrite the journal to the live state now (joins a compaction under way); the
        in-memory engine has nothing to rewrite."""
        if self.instant:
            return
        if self.compacting is None:
            self.compacting = asyncio.ensure_future(self._run_compaction())
        await asyncio.shield(self.compacting)

    async def _run_compaction(self) -> None:
        journal = self.journal
        table = self._table
        table.purge_finished(self._clock.time())
        try:
            result = await journal.compact(
                retention=table.retention, now=self._clock.time(), max_retained=table.max_retained
            )
            self.last_compaction = self._clock.time()
            logger.info("compacted %s: %s", journal.path, result)
        finally:
            self.compacting = None
        # What churn committed meanwhile may be over the trigger already: fold it now rather
        # than at the next commit, so an idle engine is never left with an outsized tail.
        self.maybe_compact()


def _progress(path: str, done: int, total: int) -> None:
    logger.info("recovering %s: %d of %d records", path, done, total)


# ---------------------------------------------------------------------- never raising
def submit_safely(journal: RecordSink, records: list[Record]) -> asyncio.Future[Any]:
    """``journal.submit(records)``, except that it never raises (see the module docstring)."""
    try:
        return journal.submit(records)
    except (TypeError, ValueError):  # one record cannot be encoded: write the others
        try:
            return journal.submit([fixed for fixed in map(_encodable, records) if fixed])
        except Exception as exc:
            return _failed(exc)
    except Exception as exc:  # closed, or the writer has failed
        return _failed(exc)


def _encodable(record: Record) -> Record | None:
    """``record`` if the journal can encode it, else a copy with its error text made encodable,
    else None (logged)."""
    if _encodes(record):
        return record
    if isinstance(record, Retry | Dead) and isinstance(record.error, str):
        text = record.error.encode("utf-8", "backslashreplace").decode("utf-8")
        fixed: Record = record._replace(error=text)
        if _encodes(fixed):
            return fixed
    logger.error("cannot journal %s of timer %r: left out", type(record).__name__, record[0])
    return None


def _encodes(record: Record) -> bool:
    try:
        codec.encode(record)
    except (TypeError, ValueError):
        return False
    return True


def _failed(error: Exception) -> asyncio.Future[None]:
    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    future.set_exception(error)
    return future


# ---------------------------------------------------------------------- logging failures
def log_write_failure(records: list[Record], error: BaseException) -> None:
    """One WARNING line for an outcome write that failed: its timers, never a payload."""
    first = records[0]
    attempt = getattr(first, "attempt", None)  # only some record kinds have one
    logger.warning(
        "journal write of %d %s record(s) failed (timer %s, version %d%s%s): %s",
        len(records),
        type(first).__name__,
        first.key,
        first.version,
        "" if attempt is None else f", attempt {attempt}",
        "" if len(records) == 1 else f", and {len(records) - 1} more",
        one_line(str(error)),
    )


def log_attempts_failure(group: list[Timer], count: int, error: object, delay: float) -> None:
    """One WARNING line for a start group whose attempt commit failed: its first timer, never
    a payload."""
    first = group[0]
    logger.warning(
        "could not commit %d attempt(s) (timer %s, version %d, attempt %d, ...): %s; "
        "they start again in %.0f s",
        count,
        first.key,
        first.version,
        first.attempts,
        error,
        delay,
    )


def logged_write(records: list[Record], future: asyncio.Future[Any]) -> None:
    """Done-callback of an outcome write nobody awaits (bind ``records`` with a partial)."""
    if not future.cancelled() and (error := future.exception()) is not None:
        log_write_failure(records, error)


def log_failure(future: asyncio.Future[Any]) -> None:
    """Done-callback for work nobody awaits: a failed journal write is a warning, not lost."""
    if future.cancelled():
        return
    error = future.exception()
    if error is not None:
        if isinstance(error, JournalError):
            logger.warning("journal write failed: %s", error)
        else:
            logger.error("background work failed", exc_info=error)
