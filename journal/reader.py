"""Read-only helpers over a journal file: a key's history, one snapshot row, summary numbers,
and a full check. Synchronous ``sqlite3`` on a read-only connection (run in a worker thread);
they work while an engine holds the journal's lock."""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass, field

import msgpack

from journal import codec
from journal.errors import JournalCorrupt
from journal.records import Record
from journal.recovery import BATCH
from journal.schema import connect_ro, raise_for, read_meta
from journal.state import TimerRow

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


@dataclass(slots=True)
class CheckReport:
    """What :func:`check_sync` found. ``ok`` when ``problems`` is empty."""

    problems: list[str] = field(default_factory=list)
    corrupt_seqs: list[int] = field(default_factory=list)
    records: int = 0
    snapshot_rows: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def info_sync(path: str) -> JournalInfo:
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
                    rec = codec.decode(kind, body, seq=seq)
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
            read_meta(con, path)
            hit = con.execute(
                "SELECT key, state, updated_at, body FROM snapshot WHERE key = ?", (key,)
            ).fetchone()
        except sqlite3.Error as exc:
            raise raise_for(exc, path, "reading") from exc
    finally:
        con.close()
    return None if hit is None else codec.decode_row(*hit)


def check_sync(path: str, limit: int = 100) -> CheckReport:
    """SQLite's ``quick_check``, then decode every snapshot row and record; report the damage
    (up to ``limit`` problems) instead of stopping at the first one."""
    report = CheckReport()
    con = connect_ro(path)
    try:
        try:
            for (line,) in con.execute("PRAGMA quick_check"):
                if line != "ok":
                    report.problems.append(f"sqlite: {line}")
            con.execute("BEGIN")
            meta = read_meta(con, path)
            cur = con.execute("SELECT key, state, updated_at, body FROM snapshot")
            while rows := cur.fetchmany(BATCH):
                for r in rows:
                    try:
                        codec.decode_row(*r)
                    except JournalCorrupt as exc:
                        report.problems.append(str(exc))
                report.snapshot_rows += len(rows)
            cur = con.execute(
                "SELECT seq, kind, body FROM records WHERE seq > ? ORDER BY seq",
                (meta.snapshot_seq,),
            )
            while rows := cur.fetchmany(BATCH):
                for seq, kind, body in rows:
                    try:
                        codec.decode(kind, body, seq=seq)
                    except JournalCorrupt as exc:
                        report.problems.append(str(exc))
                        report.corrupt_seqs.append(seq)
                report.records += len(rows)
                if len(report.problems) >= limit:
                    break
            con.execute("COMMIT")
        except JournalCorrupt as exc:
            report.problems.append(str(exc))
        except sqlite3.Error as exc:
            report.problems.append(str(raise_for(exc, path, "checking")))
    finally:
        con.close()
    return report
