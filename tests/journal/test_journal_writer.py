"""The group-commit writer: batching, order, failures, flush/busy, hooks."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest

from journal import Journal, JournalError
from journal.records import Ack, Cancel, Record, Schedule


def sched(i: int, key: str | None = None) -> Schedule:
    return Schedule(key or f"k{i}", i, "h", 1000.0 + i, None, 1.0)


def stored(path: str) -> list[tuple[int, int, bytes]]:
    con = sqlite3.connect(path)
    try:
        return con.execute("SELECT seq, kind, body FROM records ORDER BY seq").fetchall()
    finally:
        con.close()


async def test_ten_thousand_concurrent_submits_take_few_commits(db: str) -> None:
    j = await Journal.open(db, durability="full")
    commits: list[int] = []
    j.on_commit = lambda n, dt: commits.append(n)

    async def one(i: int) -> None:
        await j.submit([sched(i + 1)])

    tasks = [asyncio.create_task(one(i)) for i in range(10_000)]
    await asyncio.gather(*tasks)
    assert sum(commits) == 10_000
    assert len(commits) <= 10, commits
    assert not j.busy()
    await j.close()
    assert len(stored(db)) == 10_000


async def test_submits_during_a_commit_go_into_one_next_transaction(db: str) -> None:
    j = await Journal.open(db)
    commits: list[int] = []
    j.on_commit = lambda n, dt: commits.append(n)
    first = j.submit([sched(1)])
    await asyncio.sleep(0)  # the writer takes the first batch
    await asyncio.sleep(0)
    later = [j.submit([sched(i)]) for i in range(2, 102)]
    await asyncio.gather(first, *later)
    assert sum(commits) == 101
    assert len(commits) <= 2
    await j.close()


async def test_records_are_written_in_submit_order(db: str) -> None:
    j = await Journal.open(db)
    futs = []
    expected: list[Record] = []
    for i in range(1, 301):
        batch: list[Record] = [sched(i, key=f"x{i % 7}"), Cancel(f"x{i % 7}", i, 2.0)]
        expected += batch
        futs.append(j.submit(batch))
        if i % 50 == 0:
            await asyncio.sleep(0)
    await asyncio.gather(*futs)
    hist = []
    for k in sorted({r.key for r in expected}):
        hist += await j.history(k)
    hist.sort()
    assert [rec for _, rec in hist] == expected
    seqs = [seq for seq, _ in hist]
    assert seqs == list(range(1, len(expected) + 1))  # dense, increasing
    await j.close()


async def test_failed_transaction_fails_its_futures_only(db: str) -> None:
    j = await Journal.open(db)
    await j.submit([sched(1)])
    conn = j._conn  # the writer's aiosqlite connection: simulate a full disk
    cur = await conn.execute("PRAGMA page_count")
    (pages,) = await cur.fetchone()
    await conn.execute(f"PRAGMA max_page_count = {pages}")
    big = [Schedule(f"big{i}", 100 + i, "h", 1.0, b"x" * 2000, 1.0) for i in range(200)]
    f1 = j.submit(big[:100])
    f2 = j.submit(big[100:])
    results = await asyncio.gather(f1, f2, return_exceptions=True)
    assert all(isinstance(r, JournalError) for r in results), results
    assert db in str(results[0])
    assert not j.busy()
    await conn.execute("PRAGMA max_page_count = 1073741823")
    await j.submit([sched(2)])  # later submits work
    await j.close()
    rows = stored(db)
    assert [seq for seq, _, _ in rows] == [1, 2]  # none of the failed batch, no seq gap


async def test_a_failure_inside_a_multi_row_insert_rolls_back_the_whole_batch(db: str) -> None:
    """600 rows go as two INSERTs of 256 rows, then of 16 and of one row (journal.inserts);
    the disk fills during them: none of the batch is stored, and the next seq follows on."""
    j = await Journal.open(db)
    await j.submit([sched(1)])
    conn = j._conn
    cur = await conn.execute("PRAGMA page_count")
    (pages,) = await cur.fetchone()
    await conn.execute(f"PRAGMA max_page_count = {pages + 40}")  # room for part of the batch
    big = [Schedule(f"big{i}", 100 + i, "h", 1.0, b"x" * 500, 1.0) for i in range(600)]
    with pytest.raises(JournalError):
        await j.submit(big)
    await conn.execute("PRAGMA max_page_count = 1073741823")
    await j.submit([sched(2)])
    await j.close()
    assert [seq for seq, _, _ in stored(db)] == [1, 2]


async def test_read_only_database_fails_transaction_then_recovers(db: str) -> None:
    j = await Journal.open(db)
    await j.submit([sched(1)])
    await j._conn.execute("PRAGMA query_only = ON")
    with pytest.raises(JournalError):
        await j.submit([sched(2), sched(3)])
    await j._conn.execute("PRAGMA query_only = OFF")
    await j.submit([sched(4)])
    rec = await j.recover()
    assert sorted(rec.timers) == ["k1", "k4"]
    await j.close()


async def test_flush_busy_and_tail_records(db: str) -> None:
    j = await Journal.open(db, durability="normal")
    assert not j.busy()
    await j.flush()  # idle: returns
    fut = j.submit([sched(1), sched(2)])
    assert j.busy()
    await j.flush()
    assert fut.done()
    assert not j.busy()
    assert j.tail_records == 2
    assert j.last_seq == 2
    await j.close()
    j = await Journal.open(db)
    assert j.tail_records == 2  # counted at open
    await j.close()


async def test_cancelled_await_does_not_withdraw_records(db: str) -> None:
    j = await Journal.open(db)
    fut = j.submit([sched(1)])
    fut.cancel()
    await j.flush()
    assert len(stored(db)) == 1
    await j.close()


async def test_bad_records_raise_at_submit_and_queue_nothing(db: str) -> None:
    j = await Journal.open(db)
    with pytest.raises(TypeError):
        j.submit([sched(1), Ack("k", "v", 1.0)])  # type: ignore[arg-type]
    await j.flush()
    assert j.tail_records == 0
    await j.close()


async def test_on_commit_errors_are_contained(db: str) -> None:
    j = await Journal.open(db)

    def hook(n: int, dt: float) -> None:
        raise RuntimeError("metrics down")

    j.on_commit = hook
    await j.submit([sched(1)])
    await j.submit([sched(2)])
    await j.close()
    assert len(stored(db)) == 2


async def test_close_flushes_and_is_idempotent(db: str) -> None:
    j = await Journal.open(db)
    fut = j.submit([sched(1)])
    await j.close()
    assert fut.done() and fut.exception() is None
    await j.close()
    assert j.closed
    with pytest.raises(JournalError):
        j.submit([sched(2)])
    with pytest.raises(JournalError):
        await j.recover()
    assert len(stored(db)) == 1


async def test_readonly_journal_refuses_writes(db: str) -> None:
    j = await Journal.open(db)
    await j.close()
    ro = await Journal.open(db, readonly=True)
    with pytest.raises(JournalError, match="read-only"):
        ro.submit([sched(1)])
    with pytest.raises(JournalError, match="read-only"):
        await ro.compact(retention=0, now=0)
    await ro.flush()
    assert not ro.busy()
    await ro.close()


async def test_a_cancelled_writer_fails_every_waiting_future(db: str) -> None:
    j = await Journal.open(db)
    await j.submit([sched(1)])
    in_flight = j.submit([sched(2)])
    await asyncio.sleep(0)
    await asyncio.sleep(0)  # the writer has taken the batch and awaits the connection
    waiting = j.submit([sched(3)])
    assert j._writer is not None
    j._writer._task.cancel()
    results = await asyncio.gather(in_flight, waiting, return_exceptions=True)
    assert all(isinstance(r, JournalError) for r in results), results
    assert "may or may not" in str(results[0])
    with pytest.raises(JournalError):
        j.submit([sched(4)])
    await j.flush()  # nothing left that could be committed: returns
    await j.close()  # still closes and releases the lock
    again = await Journal.open(db)
    await again.close()


async def test_submitted_rows_are_stored_as_submitted_records(db: str) -> None:
    from journal import codec

    j = await Journal.open(db)
    await j.submit([sched(1)])
    await j.submit_rows([codec.schedule_row("k2", 2, "h", 1002.0, None, 1.0)])
    await j.close()
    rows = stored(db)
    assert [codec.open_record(body, seq, kind) for seq, kind, body in rows] == [
        sched(1),
        sched(2),
    ]
