"""Migration of a schema-1 journal to schema 2, in place, at the first writable open.

Schema 2 has the same tables; what changes is that every body is sealed with a checksum
(:mod:`journal.codec`) and ``meta`` gets a ``journal_id`` and a checksum of its own. The
migration runs inside the writable open's transaction (with the writer lock held), so it is all
or nothing: a crash or an error leaves the schema-1 journal exactly as it was.

Before sealing anything it proves the rows worth sealing, since a checksum would otherwise bless
damage that is already there: SQLite's ``quick_check``; every record decodes to its kind's shape,
seqs are dense above ``snapshot_seq`` and none is at or below it; every snapshot row decodes;
every payload is decodable msgpack. The first problem raises
:class:`~journal.errors.JournalCorrupt` naming the record or the row, and nothing is written.

Cost: one pass over the file, rewriting every row (the WAL grows to about the file's size until
the next checkpoint). Rows are read in key order a batch at a time, each batch read in full before
it is rewritten (never updating a table under a running ``SELECT`` of it).
"""

from __future__ import annotations

import logging
import sqlite3
from typing import Final

from journal import codec
from journal.checksum import seal_meta
from journal.errors import JournalCorrupt
from journal.meta import MetaInfo
from journal.records import Schedule
from journal.watermark import new_journal_id

__all__ = ["migrate"]

logger = logging.getLogger(__name__)

#: Rows read (then rewritten) per step.
_BATCH: Final = 1_000


def migrate(con: sqlite3.Connection, meta: MetaInfo, path: str) -> None:
    """Migrate the schema-1 journal open on ``con`` to schema 2. Call inside a write
    transaction (``BEGIN IMMEDIATE``); the caller commits, or rolls back when this raises."""
    problems = [line for (line,) in con.execute("PRAGMA quick_check") if line != "ok"]
    if problems:
        raise JournalCorrupt(f"journal is damaged ({problems[0]}), not migrated: {path}")
    records = _seal_records(con, meta.snapshot_seq, path)
    rows = _seal_snapshot(con, path)
    con.execute("UPDATE meta SET value = 2 WHERE name = 'schema_version'")
    con.executemany(
        "INSERT OR REPLACE INTO meta (name, value) VALUES (?, ?)",
        [("journal_id", new_journal_id()), ("snapshot_rows", rows)],
    )
    seal_meta(con)
    logger.info(
        "journal migrated to schema 2 (checksums): %d records, %d snapshot rows: %s",
        records,
        rows,
        path,
    )


def _check_payload(payload: bytes | None, where: str, seq: int | None = None) -> None:
    problem = codec.payload_problem(payload)
    if problem is not None:
        raise JournalCorrupt(f"{where}: {problem}", seq=seq)


def _seal_records(con: sqlite3.Connection, snapshot_seq: int, path: str) -> int:
    (below,) = con.execute(
        "SELECT count(*) FROM records WHERE seq <= ?", (snapshot_seq,)
    ).fetchone()
    if below:
        raise JournalCorrupt(
            f"journal has {below} records at or below its snapshot seq {snapshot_seq}: {path}"
        )
    last = snapshot_seq
    while rows := con.execute(
        "SELECT seq, kind, body FROM records WHERE seq > ? ORDER BY seq LIMIT ?", (last, _BATCH)
    ).fetchall():
        sealed = []
        for seq, kind, body in rows:
            if seq != last + 1:
                raise JournalCorrupt(f"record {last + 1}: missing", seq=last + 1)
            record = codec.decode(kind, body, seq=seq)
            if type(record) is Schedule:
                _check_payload(record.payload, f"record {seq}", seq)
            sealed.append((codec.seal_record(seq, kind, body), seq))
            last = seq
        con.executemany("UPDATE records SET body = ? WHERE seq = ?", sealed)
    return last - snapshot_seq


def _seal_snapshot(con: sqlite3.Connection, path: str) -> int:
    n = 0
    after = ""  # every key is a non-empty str, so every key sorts after ""
    while rows := con.execute(
        "SELECT key, state, updated_at, body FROM snapshot WHERE key > ? ORDER BY key LIMIT ?",
        (after, _BATCH),
    ).fetchall():
        sealed = []
        for key, state, updated_at, body in rows:
            row = codec.decode_row_v1(key, state, updated_at, body)
            _check_payload(row.payload, f"snapshot row {key!r}")
            sealed.append((codec.encode_row(row)[3], key))
        con.executemany("UPDATE snapshot SET body = ? WHERE key = ?", sealed)
        n += len(rows)
        after = rows[-1][0]
    (total,) = con.execute("SELECT count(*) FROM snapshot").fetchone()
    if total != n:  # a key that is not a non-empty str sorts before "" and was not read
        raise JournalCorrupt(f"journal has {total - n} snapshot rows with damaged keys: {path}")
    return n
