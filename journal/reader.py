"""Read-only helpers over a journal file: a key's history, one snapshot row, summary numbers,
and a full check. Synchronous ``sqlite3`` on a read-only connection (run in a worker thread);
they work while an engine holds the journal's lock, and on a schema-1 journal as it is."""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass, field

import msgpack

from journal import codec
from journal.errors import JournalCorrupt
from journal.meta import MetaInfo
from journal.records import Record, Schedule
from journal.recovery import BATCH, snapshot_count_problem
from journal.schema import connect_ro, raise_for, read_meta
from journal.state import TimerRow
from journal.watermark import Mark, read_mark, verify_mark

__all__ = ["CheckReport", "JournalInfo", "check_sync", "history_sync", "info_sync", "row_sync"]


@dataclass(slots=True)
class JournalInfo:
    """Summary numbers for ``wheel-engine status``."""

    path: str
    schema_version: int
    snapshot_seq: int  #: the highest seq folded into the snapshot
    last_seq: int  #: the highest seq committed
    tail_records: int  #: records after the snapshot
    snapshot_rows: int
    max_version: int  #: from meta: the highest version folded into the snapshot
    file_bytes: int
    wal_bytes: int
    #: the high-water mark (the last seq the writer saw committed), None if there is none
    high_water_mark: int | None = None
    #: wall-clock time of the last compaction, None if never (or not recorded: before 0.2)
    compacted_at: float | None = None


@dataclass(slots=True)
class CheckReport:
    """What :func:`check_sync` found. ``ok`` when ``problems`` is empty."""

    problems: list[str] = field(default_factory=list)
    #: records found damaged (checksum, shape, payload, kind or seq not theirs)
    corrupt_seqs: list[int] = field(default_factory=list)
    records: int = 0
    snapshot_rows: int = 0
    #: snapshot rows found damaged, by key
    corrupt_keys: list[str] = field(default_factory=list)
    #: runs of seqs ``(first, last)`` missing above the snapshot (gaps, and a lost tail)
    missing: list[tuple[int, int]] = field(default_factory=list)
    schema_version: int = 0
    #: the high-water mark, None if there is none (then a lost tail cannot be seen)
    high_water_mark: int | None = None

    @property
    def ok(self) -> bool:
        return not self.problems


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _mark_or_none(path: str) -> Mark | None:
    try:
        return read_mark(path)
    except JournalCorrupt:
        return None


def info_sync(path: str) -> JournalInfo:
    mark = _mark_or_none(path)
    con = connect_ro(path)
    try:
        try:
            con.execute("BEGIN")
            meta = read_meta(con, path)
            (snap,) = con.execute("SELECT count(*) FROM snapshot").fetchone()
            con.execute("COMMIT")
        except sqlite3.Error as exc:
            raise raise_for(exc, path, "reading") from exc
    finally:
        con.close()
    return JournalInfo(
        path=path,
        schema_version=meta.schema_version,
        snapshot_seq=meta.snapshot_seq,
        last_seq=meta.max_seq,
        tail_records=meta.tail_records,
        snapshot_rows=int(snap),
        max_version=meta.max_version,
        file_bytes=_size(path),
        wal_bytes=_size(path + "-wal"),
        high_water_mark=None if mark is None else mark.seq,
        compacted_at=meta.compacted_at,
    )


def history_sync(path: str, key: str) -> list[tuple[int, Record]]:
    """``(seq, record)`` for every tail record of ``key``, in seq order."""
    needle = msgpack.packb(key, use_bin_type=True)
    out: list[tuple[int, Record]] = []
    con = connect_ro(path)
    try:
        try:
            con.execute("BEGIN")
            meta = read_meta(con, path)
            # instr() is a cheap pre-filter in C; the decoded key is compared exactly below.
            cur = con.execute(
                "SELECT seq, kind, body FROM records WHERE seq > ? AND instr(body, ?) > 0"
                " ORDER BY seq",
                (meta.snapshot_seq, needle),
            )
            while rows := cur.fetchmany(BATCH):
                for seq, kind, body in rows:
                    rec = _record(meta, seq, kind, body)
                    if rec.key == key:
                        out.append((seq, rec))
            con.execute("COMMIT")
        except sqlite3.Error as exc:
            raise raise_for(exc, path, "reading a history") from exc
    finally:
        con.close()
    return out


def row_sync(path: str, key: str) -> TimerRow | None:
    """The snapshot's row for ``key`` (the state as of the last compaction), if any."""
    con = connect_ro(path)
    try:
        try:
            meta = read_meta(con, path)
            hit = con.execute(
                "SELECT key, state, updated_at, body FROM snapshot WHERE key = ?", (key,)
            ).fetchone()
        except sqlite3.Error as exc:
            raise raise_for(exc, path, "reading") from exc
    finally:
        con.close()
    if hit is None:
        return None
    return codec.decode_row(*hit) if meta.sealed else codec.decode_row_v1(*hit)


def _record(meta: MetaInfo, seq: int, kind: int, body: bytes) -> Record:
    """One stored record, checked: sealed (schema 2: its kind column must agree) or plain."""
    if not meta.sealed:
        return codec.decode(kind, body, seq=seq)
    return codec.open_record(body, seq, kind)


def check_sync(path: str, limit: int = 100) -> CheckReport:
    """Check everything, and report the damage (up to ``limit`` problems) instead of stopping at
    the first one: SQLite's ``quick_check``; ``meta`` and its checksum; every snapshot row and
    every record (checksum, shape, its columns against its sealed copy, its payload decodable);
    the seqs above the snapshot dense, none at or below it; and the high-water mark (records
    committed but no longer in the file)."""
    report = CheckReport()
    try:
        mark = read_mark(path)  # before the read transaction: see journal.watermark
    except JournalCorrupt as exc:
        report.problems.append(str(exc))
        mark = None
    con = connect_ro(path)
    # A damaged byte can make a key not UTF-8: read it anyway, so the row can be named.
    con.text_factory = _tolerant_text
    try:
        try:
            for (line,) in con.execute("PRAGMA quick_check"):
                if line != "ok":
                    report.problems.append(f"sqlite: {line}")
            con.execute("BEGIN")
            meta = read_meta(con, path)
            report.schema_version = meta.schema_version
            if mark is not None and mark.journal_id == meta.journal_id:
                report.high_water_mark = mark.seq
            _check_snapshot(con, path, meta, report, limit)
            _check_records(con, meta, report, limit)
            try:
                verify_mark(mark, meta.journal_id, meta.max_seq, path)
            except JournalCorrupt as exc:
                report.problems.append(str(exc))
                assert mark is not None
                report.missing.append((meta.max_seq + 1, mark.seq))
            con.execute("COMMIT")
        except JournalCorrupt as exc:
            report.problems.append(str(exc))
        except sqlite3.Error as exc:
            report.problems.append(str(raise_for(exc, path, "checking")))
    finally:
        con.close()
    return report


def _tolerant_text(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


def _check_snapshot(
    con: sqlite3.Connection, path: str, meta: MetaInfo, report: CheckReport, limit: int
) -> None:
    decode_row = codec.decode_row if meta.sealed else codec.decode_row_v1
    cur = con.execute("SELECT key, state, updated_at, body FROM snapshot")
    while rows := cur.fetchmany(BATCH):
        for r in rows:
            try:
                row = decode_row(*r)
                problem = codec.payload_problem(row.payload)
                if problem is not None:
                    raise JournalCorrupt(f"snapshot row {row.key!r}: {problem}")
            except JournalCorrupt as exc:
                report.problems.append(str(exc))
                report.corrupt_keys.append(r[0])
        report.snapshot_rows += len(rows)
        if len(report.problems) >= limit:
            return
    if meta.snapshot_rows is not None and meta.snapshot_rows != report.snapshot_rows:
        report.problems.append(
            snapshot_count_problem(meta.snapshot_rows, report.snapshot_rows, path)
        )


def _check_records(
    con: sqlite3.Connection, meta: MetaInfo, report: CheckReport, limit: int
) -> None:
    (below,) = con.execute(
        "SELECT count(*) FROM records WHERE seq <= ?", (meta.snapshot_seq,)
    ).fetchone()
    if below:
        report.problems.append(
            f"{below} records at or below the snapshot's seq {meta.snapshot_seq} "
            "(they were folded into the snapshot and should be gone)"
        )
    expected = meta.snapshot_seq + 1
    cur = con.execute(
        "SELECT seq, kind, body FROM records WHERE seq > ? ORDER BY seq", (meta.snapshot_seq,)
    )
    while rows := cur.fetchmany(BATCH):
        for seq, kind, body in rows:
            if seq != expected:
                report.problems.append(f"records {expected}..{seq - 1} are missing")
                report.missing.append((expected, seq - 1))
            expected = seq + 1
            try:
                record = _record(meta, seq, kind, body)
                if type(record) is Schedule:
                    problem = codec.payload_problem(record.payload)
                    if problem is not None:
                        raise JournalCorrupt(f"record {seq}: {problem}", seq=seq)
            except JournalCorrupt as exc:
                report.problems.append(str(exc))
                report.corrupt_seqs.append(seq)
        report.records += len(rows)
        if len(report.problems) >= limit:
            return
