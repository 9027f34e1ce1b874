"""A schema-1 journal: read as it is by read-only opens, migrated in place by a writable open,
and refused (untouched) when a row is damaged, since sealing would bless the damage."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import msgpack
import pytest

from journal import Journal, JournalCorrupt, TimerRow, apply, codec, schema
from journal.checksum import sealed
from journal.records import Ack, Attempt, Cancel, Record, Retry, Schedule
from journal.state import STATE_CODE
from journal.watermark import read_mark

SNAPSHOT = [
    TimerRow("old-a", 1, "h", 5.0, b"\x91\x01", "PENDING", 0, None, None, 1.0),  # type: ignore[arg-type]
    TimerRow("old-b", 2, "h", 6.0, None, "DEAD", 3, "boom", 2.0, 3.0),  # type: ignore[arg-type]
]
RECORDS: list[Record] = [
    Schedule("a", 3, "h", 10.0, b"\x81\xa1k\xa1v", 4.0),
    Schedule("b", 4, "h", 11.0, None, 4.0),
    Attempt("a", 3, 1, 10.5),
    Retry("a", 3, 1, "err", 20.0, 10.6),
    Cancel("b", 4, 5.0),
    Ack("old-a", 1, 6.0),
]
SNAPSHOT_SEQ = 40


def make_v1(path: Path, records: list[tuple[int, int, bytes]] | None = None) -> None:
    """A journal as wheel-engine wrote it before checksums (schema 1)."""
    con = sqlite3.connect(path)
    con.execute("PRAGMA auto_vacuum = INCREMENTAL")
    for ddl in schema._DDL:
        con.execute(ddl)
    con.executemany(
        "INSERT INTO meta (name, value) VALUES (?, ?)",
        [("schema_version", 1), ("snapshot_seq", SNAPSHOT_SEQ), ("max_version", 2)],
    )
    con.execute(f"PRAGMA application_id = {schema.APPLICATION_ID}")
    if records is None:
        records = [(SNAPSHOT_SEQ + i, *codec.encode(r)) for i, r in enumerate(RECORDS, 1)]
    con.executemany("INSERT INTO records (seq, kind, body) VALUES (?, ?, ?)", records)
    con.executemany(
        "INSERT INTO snapshot (key, state, updated_at, body) VALUES (?, ?, ?, ?)",
        [
            (
                r.key,
                STATE_CODE[r.state],
                r.updated_at,
                msgpack.packb(
                    (
                        r.version,
                        r.handler,
                        r.due,
                        r.payload,
                        r.attempts,
                        r.last_error,
                        r.first_attempt_at,
                    ),
                    use_bin_type=True,
                ),
            )
            for r in SNAPSHOT
        ],
    )
    con.commit()
    con.execute("PRAGMA journal_mode = WAL")
    con.close()


def expected() -> dict[str, TimerRow]:
    timers = {r.key: TimerRow(*(getattr(r, f) for f in r.__slots__)) for r in SNAPSHOT}
    for record in RECORDS:
        apply(timers, record)
    return timers


def stored(path: Path) -> tuple[int, list[bytes]]:
    con = sqlite3.connect(path)
    version = con.execute("SELECT value FROM meta WHERE name = 'schema_version'").fetchone()[0]
    bodies = [
        b for (b,) in con.execute("SELECT body FROM records UNION ALL SELECT body FROM snapshot")
    ]
    con.close()
    return version, bodies


async def test_read_only_tools_read_a_schema_1_journal(tmp_path: Path) -> None:
    path = tmp_path / "v1.db"
    make_v1(path)
    j = await Journal.open(path, readonly=True)
    rec = await j.recover()
    assert rec.timers == expected() and rec.last_seq == SNAPSHOT_SEQ + len(RECORDS)
    report = await j.check()
    assert report.ok and report.schema_version == 1 and report.high_water_mark is None
    assert (await j.info()).schema_version == 1
    assert [r for _, r in await j.history("a")] == [r for r in RECORDS if r.key == "a"]
    assert await j.snapshot_row("old-b") == SNAPSHOT[1]
    await j.close()
    assert stored(path)[0] == 1  # nothing written


async def test_a_writable_open_migrates_in_place(tmp_path: Path) -> None:
    path = tmp_path / "v1.db"
    make_v1(path)
    j = await Journal.open(path)
    assert (await j.recover()).timers == expected()
    await j.submit([Schedule("c", 9, "h", 1.0, None, 7.0)])
    await j.close()
    version, bodies = stored(path)
    assert version == 2 and all(sealed(b) for b in bodies)
    mark = read_mark(str(path))
    assert mark is not None and mark.seq == SNAPSHOT_SEQ + len(RECORDS) + 1
    j = await Journal.open(path, readonly=True)
    assert (await j.check()).ok
    timers = (await j.recover()).timers
    assert timers.pop("c").version == 9 and timers == expected()
    await j.close()


def _damaged(kind_body: tuple[int, bytes], at: int = 3) -> list[tuple[int, int, bytes]]:
    rows = [(SNAPSHOT_SEQ + i, *codec.encode(r)) for i, r in enumerate(RECORDS, 1)]
    rows[at - 1] = (SNAPSHOT_SEQ + at, *kind_body)
    return rows


@pytest.mark.parametrize(
    ("rows", "match"),
    [
        (_damaged((3, b"\xc1garbage")), "record 43"),  # undecodable
        (_damaged((4, codec.encode(Attempt("a", 3, 1, 1.0))[1])), "record 43"),  # wrong shape
        (_damaged(codec.encode(Schedule("z", 9, "h", 1.0, b"\xa2\xff\xfe", 1.0))), "record 43"),
        ([r for r in _damaged(codec.encode(RECORDS[2])) if r[0] != SNAPSHOT_SEQ + 2], "missing"),
    ],
    ids=["undecodable-body", "wrong-shape", "undecodable-payload", "a-gap"],
)
async def test_a_damaged_schema_1_journal_is_refused_untouched(
    tmp_path: Path, rows: list[tuple[int, int, bytes]], match: str
) -> None:
    path = tmp_path / "v1.db"
    make_v1(path, rows)
    before = stored(path)
    with pytest.raises(JournalCorrupt, match=match):
        await Journal.open(path)
    assert stored(path) == before  # not migrated, not sealed
