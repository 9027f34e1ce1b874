"""Recovery: the live state = the snapshot's rows + every later record, folded in seq order.

Runs synchronously on its own read-only ``sqlite3`` connection (the journal calls it in a worker
thread), inside one read transaction so the snapshot and the tail agree even while an engine
commits or compacts. Rows are fetched in small batches (:data:`BATCH`). Each batch of a schema-2
journal is checked with one CRC pass (:func:`journal.checksum.sealed_data`); then each record is
decoded and folded by its rule in :data:`journal.rules.FOLD` (the rules check the shape).

Nothing is skipped, altered or rolled back silently. The first damaged record or snapshot row
stops recovery with :class:`~journal.errors.JournalCorrupt` naming it (its seq, or its key), as
do: a record missing from the dense run of seqs after the snapshot, a row moved or renumbered
(its sealed seq is not its place), and a journal that holds fewer records than were committed
(its high-water mark, :mod:`journal.watermark`, is above its newest seq).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, Generic, overload

from journal.errors import JournalCorrupt
from journal.fold import fold_records, fold_sealed, fold_snapshot
from journal.meta import MetaInfo
from journal.records import Kind
from journal.schema import connect_ro, raise_for, read_meta
from journal.state import PENDING, RUNNING, STATE_CODE, RowFactory, RowT, TimerRow
from journal.watermark import read_mark, verify_mark

__all__ = [
    "BATCH",
    "PROGRESS_EVERY",
    "Progress",
    "Recovered",
    "as_journaled",
    "check_tail_end",
    "fold_records",
    "fold_sealed",
    "fold_snapshot",
    "recover_sync",
    "snapshot_count_problem",
]

#: Rows fetched per ``fetchmany``. Small on purpose: a big batch of row tuples lives long
#: enough to be promoted to the GC's old generation and triggers full collections that scan
#: every TimerRow folded so far.
BATCH: Final = 1_000
#: ``progress`` is called about every this many rows.
PROGRESS_EVERY: Final = 50_000

Progress = Callable[[int, int], None]

_ATTEMPT: Final = int(Kind.ATTEMPT)  # the only record that makes a row RUNNING
_RUNNING_CODE: Final = STATE_CODE[RUNNING]


@dataclass(slots=True)
class Recovered(Generic[RowT]):
    """What recovery found. ``timers`` holds the rows the caller's factory made (``make`` of
    :func:`recover_sync`; :class:`TimerRow` by default), by key: the caller may keep the dict
    as its own index."""

    timers: dict[str, RowT]
    #: The highest version ever issued: the next schedule must use a higher one.
    max_version: int
    #: Records replayed from the tail (the records after the snapshot).
    records: int
    #: Rows read from the snapshot.
    snapshot_rows: int = 0
    #: The highest seq folded in (the journal's last committed record).
    last_seq: int = 0
    #: RUNNING rows turned back into PENDING (their attempt was interrupted).
    interrupted: list[str] = field(default_factory=list)


def as_journaled(recovered: Recovered[TimerRow]) -> Recovered[TimerRow]:
    """``recovered`` as the journal has it, for readers (the CLI, the web console), never for
    an engine: recovery turns an interrupted row back into PENDING, as an engine starting now
    would; here each is RUNNING again (its attempt is committed, its outcome is not, yet)."""
    timers = recovered.timers
    for key in recovered.interrupted:
        row = timers.get(key)
        if row is not None and row.state is PENDING:
            row.state = RUNNING
    return recovered


def snapshot_count_problem(expected: int, found: int, path: str) -> str:
    how = "lost" if found < expected else "added"
    return (
        f"journal snapshot has {found} rows where {expected} were written "
        f"({abs(expected - found)} {how}): {path}"
    )


def check_tail_end(meta: MetaInfo, last_seq: int, path: str) -> None:
    """After the tail was folded up to ``last_seq``: the file must hold nothing beyond it.

    Catches the newest record renumbered upwards (a higher rowid, the same place in seq order),
    which the sealed seqs alone cannot see.
    """
    if meta.max_seq != last_seq:
        raise JournalCorrupt(
            f"records {last_seq + 1}..{meta.max_seq} are missing (the newest row is numbered "
            f"{meta.max_seq}, the records in seq order end at {last_seq}): {path}",
            seq=last_seq + 1,
        )


def _read_snapshot(
    con: sqlite3.Connection,
    timers: dict[str, RowT],
    meta: MetaInfo,
    tick: Callable[[int], None],
    make: RowFactory[RowT],
    states: set[int],
) -> tuple[int, int]:
    n = 0
    max_version = meta.max_version
    cur = con.execute("SELECT key, state, updated_at, body FROM snapshot")
    while rows := cur.fetchmany(BATCH):
        max_version = fold_snapshot(
            timers, rows, max_version, sealed=meta.sealed, make=make, states=states
        )
        n += len(rows)
        tick(len(rows))
    return n, max_version


def _read_tail(
    con: sqlite3.Connection,
    path: str,
    timers: dict[str, RowT],
    meta: MetaInfo,
    max_version: int,
    tick: Callable[[int], None],
    make: RowFactory[RowT],
    kinds: set[int],
) -> tuple[int, int]:
    """Fold every record after the snapshot; returns ``(last seq, max version)``. ``kinds``
    gets the kinds folded other than schedules."""
    last = meta.snapshot_seq
    if meta.sealed:
        cur = con.execute("SELECT kind, body FROM records WHERE seq > ? ORDER BY seq", (last,))
        while rows := cur.fetchmany(BATCH):
            max_version = fold_sealed(timers, rows, last, max_version, make, kinds)
            last += len(rows)
            tick(len(rows))
    else:
        cur = con.execute("SELECT seq, kind, body FROM records WHERE seq > ? ORDER BY seq", (last,))
        while old := cur.fetchmany(BATCH):
            if old[0][0] != last + 1 or old[-1][0] != last + len(old):  # seqs are dense
                missing = next(want for want, row in enumerate(old, last + 1) if row[0] != want)
                raise JournalCorrupt(f"record {missing}: missing", seq=missing)
            max_version = fold_records(timers, old, max_version, make, kinds)
            last += len(old)
            tick(len(old))
    check_tail_end(meta, last, path)
    return last, max_version


@overload
def recover_sync(path: str, progress: Progress | None = None) -> Recovered[TimerRow]: ...


@overload
def recover_sync(
    path: str, progress: Progress | None, make: RowFactory[RowT]
) -> Recovered[RowT]: ...


def recover_sync(
    path: str, progress: Progress | None = None, make: RowFactory[Any] = TimerRow
) -> Recovered[Any]:
    """Rebuild the live state of the journal at ``path`` (read-only; no lock needed).

    Each timer's row is built once, by ``make`` (:data:`~journal.state.RowFactory`; a
    :class:`TimerRow` by default), and then changed in place by the later records: a caller
    with its own timer class passes a factory and keeps ``Recovered.timers`` as its index. The
    checks are the same whatever ``make`` is.
    """
    mark = read_mark(path)  # before the read transaction: see journal.watermark
    con = connect_ro(path)
    try:
        try:
            con.execute("BEGIN")
            meta = read_meta(con, path)
            verify_mark(mark, meta.journal_id, meta.max_seq, path)
            (snap_count,) = con.execute("SELECT count(*) FROM snapshot").fetchone()
            total = int(snap_count) + meta.tail_records
            done = 0
            reported = 0

            def tick(n: int) -> None:
                nonlocal done, reported
                done += n
                if progress is not None and (done - reported >= PROGRESS_EVERY or done == total):
                    reported = done
                    progress(done, total)

            if meta.snapshot_rows is not None and meta.snapshot_rows != snap_count:
                raise JournalCorrupt(snapshot_count_problem(meta.snapshot_rows, snap_count, path))
            timers: dict[str, Any] = {}
            states: set[int] = set()  # the snapshot's state codes
            kinds: set[int] = set()  # the tail's kinds, schedules aside
            snapshot_rows, max_version = _read_snapshot(con, timers, meta, tick, make, states)
            last_seq, max_version = _read_tail(
                con, path, timers, meta, max_version, tick, make, kinds
            )
            con.execute("COMMIT")
        except sqlite3.Error as exc:
            raise raise_for(exc, path, "recovering") from exc
    finally:
        con.close()
    if progress is not None and total == 0:
        progress(0, 0)
    # A row is RUNNING only if it was stored so or an attempt record made it so: without
    # either, the scan over every row (a million at the benchmark's largest size) is skipped.
    interrupted = (
        [row.key for row in timers.values() if row.state is RUNNING]
        if _RUNNING_CODE in states or _ATTEMPT in kinds
        else []
    )
    for key in interrupted:
        timers[key].state = PENDING
    return Recovered(
        timers=timers,
        max_version=max_version,
        records=last_seq - meta.snapshot_seq,
        snapshot_rows=snapshot_rows,
        last_seq=last_seq,
        interrupted=interrupted,
    )
