"""Recovery: the live state = the snapshot's rows + every later record, folded in seq order.

Runs synchronously on its own read-only ``sqlite3`` connection (the journal calls it in a worker
thread), inside one read transaction so the snapshot and the tail agree even while an engine
commits or compacts. Rows are fetched in small batches (:data:`BATCH`). Each batch of a schema-2
journal is checked with one CRC pass (:func:`journal.checksum.sealed_data`); then each record is
decoded and folded by its rule in :data:`journal.state.FOLD` (the rules check the shape).

Nothing is skipped, altered or rolled back silently. The first damaged record or snapshot row
stops recovery with :class:`~journal.errors.JournalCorrupt` naming it (its seq, or its key), as
do: a record missing from the dense run of seqs after the snapshot, a row moved or renumbered
(its sealed seq is not its place), and a journal that holds fewer records than were committed
(its high-water mark, :mod:`journal.watermark`, is above its newest seq).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, Final, Generic, overload

import msgpack

from journal import codec
from journal.checksum import sealed_data
from journal.errors import JournalCorrupt
from journal.schema import MetaInfo, connect_ro, raise_for, read_meta
from journal.state import FOLD, PENDING, RUNNING, STATES, RowFactory, RowT, TimerRow
from journal.watermark import read_mark, verify_mark

__all__ = [
    "BATCH",
    "PROGRESS_EVERY",
    "Progress",
    "Recovered",
    "check_tail_end",
    "fold_records",
    "fold_sealed",
    "fold_snapshot",
    "recover_sync",
    "snapshot_count_problem",
]

#: Rows fetched per ``fetchmany``. Small on purpose: a big batch of row tuples lives long
#: enough to be promoted to the GC's old generation and triggers full collections that scan
#: every TimerRow folded so far (measured: 50k-row batches spend ~3x more time in the GC).
BATCH: Final = 1_000
#: ``progress`` is called about every this many rows.
PROGRESS_EVERY: Final = 50_000

_NUM: Final = (float, int)
_OPT_NUM: Final = (float, int, type(None))
_OPT_STR: Final = (str, type(None))
_OPT_BYTES: Final = (bytes, type(None))
_BODY: Final = itemgetter(3)  # a snapshot row's body
_BODY_OF_RECORD: Final = itemgetter(1)  # a ``(kind, body)`` record row's body

Progress = Callable[[int, int], None]


class _Bad(Exception):
    """A row failed a check in a hot loop (then re-diagnosed by the careful decoder)."""


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


def fold_sealed(
    timers: dict[str, RowT],
    rows: list[tuple[int, bytes]],
    after_seq: int,
    max_version: int,
    make: RowFactory[RowT] = TimerRow,  # type: ignore[assignment]  # RowT is TimerRow then
) -> int:
    """Check and fold stored (schema 2) records: ``(kind, body)`` rows, the records right after
    ``after_seq`` in seq order, rows made by ``make``. Returns the new max version.

    Raises :class:`JournalCorrupt` naming the first record that is damaged (checksum, shape, a
    kind column that is not its sealed kind) or not in its place (a record missing, moved or
    renumbered: its sealed seq is not the next one).
    """
    data = _joined(map(_BODY_OF_RECORD, rows))
    if data is None or not sealed_data(data):
        _diagnose_records(rows, after_seq)  # raises: if every blob is sealed, so is the batch
        data = b""  # pragma: no cover
    # The batch is intact, so it is the bodies as sealed, back to back: one streaming decode
    # (no per-row call overhead). Each row's sealed seq keeps the rows and the values in step.
    # (Bytes moved across a row boundary, the concatenation unchanged, decode to exactly what
    # was written, so the fold is right; ``check`` looks at each row alone and reports them.)
    values = msgpack.Unpacker(
        None, raw=False, use_list=False, strict_map_key=True, max_buffer_size=len(data) or 1
    )
    values.feed(data)
    fold = FOLD
    seq = after_seq
    try:
        for (column_kind, _), (fields, kind, stored_seq, _crc) in zip(rows, values, strict=True):
            seq += 1
            if stored_seq != seq or kind != column_kind:
                raise _Bad
            version = fold[kind](timers, fields, make)
            if version > max_version:
                max_version = version
    except Exception as exc:
        _diagnose_records(rows, after_seq)
        raise JournalCorrupt(f"record {seq}: damaged ({exc!r})", seq=seq) from exc
    return max_version


def _joined(bodies: Iterable[Any]) -> bytes | None:
    """The bodies back to back, or None if one is not a blob at all (a damaged row)."""
    try:
        return b"".join(bodies)
    except TypeError:
        return None


def _diagnose_records(rows: list[tuple[int, bytes]], after_seq: int) -> None:
    """Raise for the first bad row of a batch, saying what is wrong with it."""
    for seq, (kind, blob) in enumerate(rows, after_seq + 1):
        codec.open_record(blob, seq, kind)  # raises JournalCorrupt for a bad one


def fold_records(
    timers: dict[str, RowT],
    rows: list[tuple[int, int, bytes]],
    max_version: int,
    make: RowFactory[RowT] = TimerRow,  # type: ignore[assignment]  # RowT is TimerRow then
) -> int:
    """Fold schema-1 ``(seq, kind, body)`` rows (no checksums) in order. Returns the new max
    version; raises :class:`JournalCorrupt` naming the first damaged record's seq."""
    unpackb = msgpack.unpackb
    fold = FOLD
    seq = kind = body = None
    try:
        for seq, kind, body in rows:  # noqa: B007 (they name a damaged record below)
            version = fold[kind](
                timers, unpackb(body, raw=False, use_list=False, strict_map_key=True), make
            )
            if version > max_version:
                max_version = version
    except Exception as exc:
        codec.decode(kind, body, seq=seq)  # type: ignore[arg-type]  # raises with the reason
        raise JournalCorrupt(f"record {seq}: damaged ({exc!r})", seq=seq) from exc
    return max_version


def fold_snapshot(
    timers: dict[str, RowT],
    rows: list[tuple[str, int, float, bytes]],
    max_version: int,
    *,
    sealed: bool = True,
    make: RowFactory[RowT] = TimerRow,  # type: ignore[assignment]  # RowT is TimerRow then
) -> int:
    """Decode ``(key, state, updated_at, body)`` snapshot rows into ``timers`` (rows made by
    ``make``).

    The same checks as :func:`journal.codec.decode_row` (``decode_row_v1`` when not
    ``sealed``), inlined, with one CRC pass and one streaming decode for the whole batch (as
    :func:`fold_sealed`). Returns the new max version; raises
    :class:`~journal.errors.JournalCorrupt` naming the first damaged row's key.
    """
    decode_row = codec.decode_row if sealed else codec.decode_row_v1
    values: Iterable[tuple[Any, ...]]
    if sealed:
        data = _joined(map(_BODY, rows))
        if data is None or not sealed_data(data):
            for row in rows:
                decode_row(*row)  # raises: if every body is sealed, so is the batch
            data = b""  # pragma: no cover
        unpacker = msgpack.Unpacker(
            None, raw=False, use_list=False, strict_map_key=True, max_buffer_size=len(data) or 1
        )
        unpacker.feed(data)
        values = unpacker
    else:  # schema 1: no checksums, so each body is decoded on its own (exact framing)
        values = map(_as_sealed_v1, rows)
    num = _NUM
    opt_num = _OPT_NUM
    opt_str = _OPT_STR
    opt_bytes = _OPT_BYTES
    states = STATES
    n_states = len(STATES)
    new_row = make
    handlers: dict[str, str] = {}
    bad = _Bad
    key: Any = None
    try:
        for (key, state, updated_at, _), (
            version,
            handler,
            due,
            payload,
            attempts,
            last_error,
            first_attempt_at,
            stored_key,
            stored_state,
            stored_updated_at,
            _crc,
        ) in zip(rows, values, strict=True):
            if (
                stored_key != key
                or stored_state != state
                or stored_updated_at != updated_at
                or type(key) is not str
                or type(state) is not int
                or not 0 <= state < n_states
                or type(updated_at) not in num
                or type(version) is not int
                or type(handler) is not str
                or type(due) not in num
                or type(payload) not in opt_bytes
                or type(attempts) is not int
                or type(last_error) not in opt_str
                or type(first_attempt_at) not in opt_num
            ):
                raise bad
            if version > max_version:
                max_version = version
            timers[key] = new_row(
                key,
                version,
                handlers.setdefault(handler, handler),
                due,
                payload,
                states[state],
                attempts,
                last_error,
                first_attempt_at,
                updated_at,
            )
    except Exception as exc:
        for row in rows:
            decode_row(*row)  # raises with the reason
        raise JournalCorrupt(f"snapshot row {key!r}: damaged ({exc!r})") from exc
    return max_version


def _as_sealed_v1(row: tuple[str, int, float, bytes]) -> tuple[Any, ...]:
    """A schema-1 snapshot row's values, laid out as a sealed row's (no CRC)."""
    key, state, updated_at, body = row
    return (*codec.unpack(body), key, state, updated_at, None)


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
) -> tuple[int, int]:
    n = 0
    max_version = meta.max_version
    cur = con.execute("SELECT key, state, updated_at, body FROM snapshot")
    while rows := cur.fetchmany(BATCH):
        max_version = fold_snapshot(timers, rows, max_version, sealed=meta.sealed, make=make)
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
) -> tuple[int, int]:
    """Fold every record after the snapshot; returns ``(last seq, max version)``."""
    last = meta.snapshot_seq
    if meta.sealed:
        cur = con.execute("SELECT kind, body FROM records WHERE seq > ? ORDER BY seq", (last,))
        while rows := cur.fetchmany(BATCH):
            max_version = fold_sealed(timers, rows, last, max_version, make)
            last += len(rows)
            tick(len(rows))
    else:
        cur = con.execute("SELECT seq, kind, body FROM records WHERE seq > ? ORDER BY seq", (last,))
        while old := cur.fetchmany(BATCH):
            if old[0][0] != last + 1 or old[-1][0] != last + len(old):  # seqs are dense
                missing = next(want for want, row in enumerate(old, last + 1) if row[0] != want)
                raise JournalCorrupt(f"record {missing}: missing", seq=missing)
            max_version = fold_records(timers, old, max_version, make)
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
            snapshot_rows, max_version = _read_snapshot(con, timers, meta, tick, make)
            last_seq, max_version = _read_tail(con, path, timers, meta, max_version, tick, make)
            con.execute("COMMIT")
        except sqlite3.Error as exc:
            raise raise_for(exc, path, "recovering") from exc
    finally:
        con.close()
    if progress is not None and total == 0:
        progress(0, 0)
    interrupted = [row.key for row in timers.values() if row.state is RUNNING]
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
