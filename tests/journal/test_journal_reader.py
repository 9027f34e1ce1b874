"""``check``: every kind of damage is reported, with the record or the row it is in."""

from __future__ import annotations

import sqlite3

from journal import Journal
from journal.reader import CheckReport, check_sync
from journal.records import Ack, Schedule


async def journal_with(db: str, *, compact_after: int = 0, records: int = 10) -> None:
    j = await Journal.open(db)
    await j.submit([Schedule(f"k{i}", i + 1, "h", 1.0, b"\x90", 0.0) for i in range(records)])
    if compact_after:
        await j.compact(retention=1e9, now=0.0)
        await j.submit([Ack(f"k{i}", i + 1, 1.0) for i in range(compact_after)])
    await j.close()


def sql(db: str, statement: str, *args: object) -> None:
    con = sqlite3.connect(db)
    con.execute(statement, args)
    con.commit()
    con.close()


def check(db: str) -> CheckReport:
    report = check_sync(db)
    assert not report.ok
    return report


async def test_a_deleted_record_is_a_gap(db: str) -> None:
    await journal_with(db)
    sql(db, "DELETE FROM records WHERE seq IN (4, 5)")
    report = check(db)
    assert report.missing == [(4, 5)]
    assert "records 4..5 are missing" in report.problems


async def test_a_kind_column_that_is_not_the_sealed_kind(db: str) -> None:
    j = await Journal.open(db)
    await j.submit([Schedule("k", 1, "h", 1.0, None, 0.0), Ack("k", 1, 1.0)])
    await j.close()
    sql(db, "UPDATE records SET kind = 2 WHERE seq = 2")  # Ack -> Cancel: the same shape
    report = check(db)
    assert report.corrupt_seqs == [2] and "kind column" in report.problems[0]


async def test_an_undecodable_payload_is_named(db: str) -> None:
    j = await Journal.open(db)
    await j.submit([Schedule("k", 1, "h", 1.0, b"\xa2\xff\xfe", 0.0)])  # a str, not UTF-8
    await j.compact(retention=1e9, now=0.0)
    await j.submit([Schedule("t", 2, "h", 1.0, b"\xc1", 0.0)])  # reserved byte
    await j.close()
    report = check(db)
    assert report.corrupt_keys == ["k"] and report.corrupt_seqs == [2]
    assert all("payload is not decodable" in p for p in report.problems)


async def test_a_deleted_snapshot_row(db: str) -> None:
    await journal_with(db, compact_after=2)
    sql(db, "DELETE FROM snapshot WHERE key = 'k7'")
    assert any("has 9 rows where 10 were written" in p for p in check(db).problems)


async def test_a_record_at_or_below_the_snapshot(db: str) -> None:
    await journal_with(db, compact_after=2)
    sql(db, "INSERT INTO records (seq, kind, body) SELECT 3, kind, body FROM records LIMIT 1")
    assert any("at or below the snapshot's seq 10" in p for p in check(db).problems)


async def test_a_key_that_is_not_utf8_is_named(db: str) -> None:
    await journal_with(db, compact_after=1)
    sql(db, "UPDATE snapshot SET key = CAST(x'6bff33' AS TEXT) WHERE key = 'k3'")
    report = check(db)
    assert report.corrupt_keys == ["k\udcff3"]


async def test_every_problem_is_listed_not_just_the_first(db: str) -> None:
    await journal_with(db, records=30)
    for seq in (3, 9, 20):
        sql(db, "UPDATE records SET body = x'00' WHERE seq = ?", seq)
    report = check(db)
    assert report.corrupt_seqs == [3, 9, 20] and report.records == 30
