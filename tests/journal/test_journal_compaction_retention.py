"""Compaction's ``max_retained``: at most that many finished rows survive, the newest by
``(updated_at, key)``, counted over the whole new snapshot (rows folded now and rows untouched
since an earlier compaction alike); DEAD and live rows never count and are never dropped."""

from __future__ import annotations

import math

from journal import Journal
from journal.records import Ack, Attempt, Cancel, Dead, Record, Schedule


def finished(key: str, version: int, at: float) -> list[Record]:
    return [Schedule(key, version, "h", 1.0, None, 0.0), Cancel(key, version, at)]


async def test_only_the_newest_finished_rows_are_kept(db: str) -> None:
    j = await Journal.open(db)
    records: list[Record] = []
    for i in range(6):
        records += finished(f"c{i}", i + 1, 10.0 + i)
    records += [
        Schedule("dead", 20, "h", 1.0, None, 0.0),
        Dead("dead", 20, 1, "no", 1.0),  # older than every finished row: kept anyway
        Schedule("live", 21, "h", 1.0, None, 0.0),
        Schedule("running", 22, "h", 1.0, None, 0.0),
        Attempt("running", 22, 1, 2.0),
    ]
    await j.submit(records)
    res = await j.compact(retention=math.inf, now=100.0, max_retained=2)
    assert res.dropped_timers == 4
    rows = (await j.recover()).timers
    assert sorted(rows) == ["c4", "c5", "dead", "live", "running"]
    await j.close()


async def test_untouched_rows_and_new_ones_share_one_limit(db: str) -> None:
    j = await Journal.open(db)
    await j.submit(finished("old1", 1, 10.0) + finished("old2", 2, 11.0))
    await j.compact(retention=math.inf, now=100.0, max_retained=10)  # both kept, untouched now
    await j.submit(
        finished("new1", 3, 12.0)
        + finished("new2", 4, 13.0)
        # a touched key whose stored row is finished, now live again: it does not count
        + [Schedule("old2", 5, "h", 1.0, None, 14.0)]
    )
    await j.compact(retention=math.inf, now=100.0, max_retained=2)
    assert sorted((await j.recover()).timers) == ["new1", "new2", "old2"]
    await j.submit([Ack("old2", 5, 15.0)])
    await j.compact(retention=math.inf, now=100.0, max_retained=2)  # old2 (15) + new2 (13)
    assert sorted((await j.recover()).timers) == ["new2", "old2"]
    await j.close()


async def test_ties_go_by_key_and_zero_keeps_none(db: str) -> None:
    j = await Journal.open(db)
    records: list[Record] = []
    for i, key in enumerate(("b", "d", "a", "c")):
        records += finished(key, i + 1, 50.0)  # all finished at the same instant
    await j.submit(records)
    await j.compact(retention=math.inf, now=100.0, max_retained=3)
    assert sorted((await j.recover()).timers) == ["b", "c", "d"]  # "a" is the oldest by key
    await j.compact(retention=math.inf, now=100.0, max_retained=0)
    assert (await j.recover()).timers == {}
    await j.close()


async def test_retention_and_the_limit_both_apply(db: str) -> None:
    j = await Journal.open(db)
    records: list[Record] = []
    for i in range(5):
        records += finished(f"k{i}", i + 1, 10.0 * i)  # at 0, 10, 20, 30, 40
    await j.submit(records)
    await j.compact(retention=25.0, now=50.0, max_retained=10)  # cutoff 25: k3, k4
    assert sorted((await j.recover()).timers) == ["k3", "k4"]
    await j.compact(retention=25.0, now=50.0, max_retained=1)
    assert sorted((await j.recover()).timers) == ["k4"]
    await j.close()
