"""Compaction: online, atomic, retention, and versions never reused."""

from __future__ import annotations

import asyncio
import os
import sqlite3

from journal import Journal
from journal.records import Ack, Attempt, Cancel, Dead, Record, Schedule
from journal.state import TimerRow


def count(path: str, table: str) -> int:
    con = sqlite3.connect(path)
    try:
        return int(con.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
    finally:
        con.close()


async def test_max_version_survives_compaction_of_the_highest_timer(db: str) -> None:
    j = await Journal.open(db)
    await j.submit(
        [
            Schedule("low", 1, "h", 5.0, None, 1.0),
            Schedule("high", 9, "h", 5.0, None, 1.0),
            Attempt("high", 9, 1, 5.0),
            Ack("high", 9, 5.0),
        ]
    )
    res = await j.compact(retention=0.0, now=100.0)  # "high" finished long ago: dropped
    assert res.live_rows == 1
    assert res.removed_records == 4
    assert res.dropped_timers == 1
    assert res.max_version == 9
    await j.close()
    j = await Journal.open(db)
    rec = await j.recover()
    assert sorted(rec.timers) == ["low"]
    assert rec.max_version == 9
    # and again, with nothing left that carries version 9
    await j.submit([Cancel("low", 1, 200.0)])
    await j.compact(retention=0.0, now=300.0)
    rec = await j.recover()
    assert rec.timers == {}
    assert rec.max_version == 9
    await j.close()


async def test_retention_keeps_recent_finished_and_all_dead(db: str) -> None:
    j = await Journal.open(db)
    await j.submit(
        [
            Schedule("old-ok", 1, "h", 1.0, None, 1.0),
            Ack("old-ok", 1, 10.0),
            Schedule("new-ok", 2, "h", 1.0, None, 1.0),
            Ack("new-ok", 2, 95.0),
            Schedule("old-cancel", 3, "h", 1.0, None, 1.0),
            Cancel("old-cancel", 3, 10.0),
            Schedule("old-dead", 4, "h", 1.0, None, 1.0),
            Dead("old-dead", 4, 3, "gave up", 10.0),
            Schedule("pending", 5, "h", 1.0, None, 1.0),
            Schedule("running", 6, "h", 1.0, None, 1.0),
            Attempt("running", 6, 1, 10.0),
        ]
    )
    res = await j.compact(retention=10.0, now=100.0)  # cutoff 90
    assert res.dropped_timers == 2
    rec = await j.recover()
    assert sorted(rec.timers) == ["new-ok", "old-dead", "pending", "running"]
    assert rec.timers["running"].state == "PENDING"  # recovery's rule
    row = await j.snapshot_row("running")
    assert row is not None and row.state == "RUNNING"  # the snapshot keeps the fold as is
    # a later compaction applies retention to untouched snapshot rows too (in SQL)
    res = await j.compact(retention=10.0, now=200.0)
    assert res.dropped_timers == 1  # new-ok
    assert sorted((await j.recover()).timers) == ["old-dead", "pending", "running"]
    await j.close()


async def test_compaction_equals_replay(db: str) -> None:
    j = await Journal.open(db)
    recs: list[Record] = []
    for i in range(2000):
        k = f"k{i % 300}"
        recs.append(Schedule(k, i + 1, "h", float(i), None, float(i)))
        if i % 3 == 0:
            recs.append(Attempt(k, i + 1, 1, float(i)))
        if i % 5 == 0:
            recs.append(Ack(k, i + 1, float(i)))
    for n in range(0, len(recs), 100):
        await j.submit(recs[n : n + 100])
        if n % 700 == 0:
            await j.compact(retention=1e12, now=0.0)
    before = await j.recover()
    await j.compact(retention=1e12, now=0.0)
    after = await j.recover()
    assert after.timers == before.timers
    assert after.max_version == before.max_version == 2000
    assert after.records == 0
    assert j.tail_records == 0
    assert count(db, "records") == 0
    await j.close()


async def test_compaction_is_online_nothing_lost(db: str) -> None:
    j = await Journal.open(db)
    expected: dict[str, int] = {}
    for i in range(3000):
        expected[f"k{i}"] = i + 1
    await j.submit([Schedule(k, v, "h", 1.0, None, 1.0) for k, v in list(expected.items())[:1500]])

    async def producer() -> None:
        items = list(expected.items())[1500:]
        for n in range(0, len(items), 10):
            await j.submit([Schedule(k, v, "h", 1.0, None, 1.0) for k, v in items[n : n + 10]])

    prod = asyncio.create_task(producer())
    results = []
    while not prod.done():
        results.append(await j.compact(retention=0.0, now=0.0))
        await asyncio.sleep(0)
    await prod
    results.append(await j.compact(retention=0.0, now=0.0))
    assert len(results) >= 2
    assert sum(r.removed_records for r in results) == 3000
    rec = await j.recover()
    assert {k: r.version for k, r in rec.timers.items()} == expected
    assert j.tail_records == count(db, "records")
    await j.close()
    j = await Journal.open(db, readonly=True)
    assert {k: r.version for k, r in (await j.recover()).timers.items()} == expected
    await j.close()


async def test_records_after_s_stay_in_tail(db: str) -> None:
    j = await Journal.open(db)
    await j.submit([Schedule("a", 1, "h", 1.0, None, 1.0)])
    compaction = asyncio.create_task(j.compact(retention=0.0, now=0.0))
    await asyncio.sleep(0)  # compaction has taken S = 1
    late = j.submit([Attempt("a", 1, 1, 2.0)])
    res = await compaction
    await late
    assert res.snapshot_seq == 1
    assert j.tail_records == 1
    rec = await j.recover()
    assert rec.records == 1
    assert rec.timers["a"].attempts == 1
    await j.close()


async def test_seq_keeps_increasing_after_compacting_everything(db: str) -> None:
    j = await Journal.open(db)
    await j.submit([Schedule("a", 1, "h", 1.0, None, 1.0)] * 3)
    await j.compact(retention=0.0, now=0.0)
    await j.close()
    j = await Journal.open(db)  # the records table is empty now
    await j.submit([Attempt("a", 1, 1, 2.0)])
    hist = await j.history("a")
    assert [seq for seq, _ in hist] == [4]
    rec = await j.recover()
    assert rec.timers["a"] == TimerRow("a", 1, "h", 1.0, None, "PENDING", 1, None, 2.0, 2.0)
    await j.close()


async def test_file_shrinks_when_the_live_state_does(db: str) -> None:
    j = await Journal.open(db, durability="normal")
    keys = [f"k{i}" for i in range(20_000)]
    await j.submit([Schedule(k, i + 1, "h", 1.0, b"x" * 100, 1.0) for i, k in enumerate(keys)])
    await j.compact(retention=0.0, now=0.0)
    big = os.path.getsize(db)
    await j.submit([Cancel(k, i + 1, 1.0) for i, k in enumerate(keys)])
    res = await j.compact(retention=0.0, now=10.0)
    assert res.live_rows == 0
    await j.close()
    assert os.path.getsize(db) < big / 4
    j = await Journal.open(db)
    rec = await j.recover()
    assert rec.timers == {}
    assert rec.max_version == 20_000
    await j.close()
