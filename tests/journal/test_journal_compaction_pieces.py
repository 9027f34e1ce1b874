"""Compaction in pieces: the same journal as one piece would leave, group commits between the
pieces, and a SIGKILL between two pieces leaves a journal compacted up to the last one."""

from __future__ import annotations

import asyncio
import math
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_journal_model import model, record

import journal.compaction as compaction
from journal import Journal
from journal.compaction_plan import CompactionPlan
from journal.records import Ack, Attempt, Record, Schedule

ROOT = Path(__file__).resolve().parents[2]


def stored(path: str) -> tuple[list[Any], list[Any], dict[str, Any]]:
    """The snapshot's rows, the records and ``meta``, without what differs between two journals
    of the same history (the wall-clock stamp, the random id, the checksum over them)."""
    con = sqlite3.connect(path)
    try:
        snapshot = con.execute("SELECT * FROM snapshot ORDER BY key").fetchall()
        records = con.execute("SELECT * FROM records ORDER BY seq").fetchall()
        meta = dict(con.execute("SELECT name, value FROM meta").fetchall())
    finally:
        con.close()
    for name in ("compacted_at", "checksum", "journal_id"):
        meta.pop(name, None)
    return snapshot, records, meta


async def compacted(
    path: str, batches: list[list[Record]], piece: int | None, now: float, kept: int | None
) -> tuple[Any, ...]:
    """Submit ``batches`` (compacting after the first), compact in pieces of ``piece``."""
    j = await Journal.open(path, durability="normal")
    try:
        for n, batch in enumerate(batches):
            await j.submit(batch)
            if n == 0:
                await j.compact(retention=math.inf, now=0.0)
        writer = j._writer
        assert writer is not None
        result = await compaction.compact(path, writer, now - 10.0, kept, piece)
        assert j.tail_records == 0
        rec = await j.recover()
    finally:
        await j.close()
    return stored(path), rec.timers, rec.max_version, result


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.lists(record, min_size=1, max_size=8), min_size=1, max_size=5),
    st.integers(min_value=1, max_value=7),
    st.floats(min_value=0, max_value=120),
    st.none() | st.integers(min_value=0, max_value=3),
)
def test_pieces_leave_what_one_piece_leaves(
    batches: list[list[Record]], piece: int, now: float, kept: int | None
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        whole = asyncio.run(compacted(f"{tmp}/whole.db", batches, None, now, kept))
        pieces = asyncio.run(compacted(f"{tmp}/pieces.db", batches, piece, now, kept))
    assert pieces[:3] == whole[:3]
    result, one = pieces[3], whole[3]
    assert one.pieces == 1
    assert result.pieces == max(1, math.ceil(sum(map(len, batches[1:])) / piece))
    for name in ("live_rows", "removed_records", "dropped_timers", "snapshot_seq", "max_version"):
        assert getattr(result, name) == getattr(one, name), name


async def test_commits_pass_between_pieces(db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    j = await Journal.open(db, durability="normal")
    await j.submit([Schedule(f"k{i}", i + 1, "h", 1.0, None, 1.0) for i in range(1_000)])
    await j.submit([Ack(f"k{i}", i + 1, 2.0) for i in range(1_000)])
    written = compaction.write_piece
    late: list[asyncio.Future[None]] = []
    seen: list[bool] = []

    async def write_piece(conn: Any, plan: CompactionPlan) -> Any:
        seen.append(all(fut.done() for fut in late))  # submitted during an earlier piece
        late.append(j.submit([Schedule(f"new{len(late)}", 5_000 + len(late), "h", 1.0, None, 1.0)]))
        return await written(conn, plan)

    monkeypatch.setattr(compaction, "write_piece", write_piece)
    monkeypatch.setattr(compaction, "PIECE_RECORDS", 300)
    result = await j.compact(retention=0.0, now=3.0)
    assert result.pieces == len(seen) == 7  # 2,000 records, 300 a piece
    assert all(seen)
    assert result.live_rows == 0 and result.dropped_timers == 1_000
    assert result.longest_write_seconds <= result.write_seconds
    await asyncio.gather(*late)
    assert j.tail_records == len(late)
    rec = await j.recover()
    assert sorted(rec.timers) == sorted(f"new{i}" for i in range(len(late)))
    await j.close()


CHILD = textwrap.dedent(
    """
    import asyncio, sys, time
    import journal.compaction as compaction
    from journal import Journal
    from journal.records import Ack, Attempt, Schedule

    written = compaction.write_piece

    async def write_piece(conn, plan):
        result = await written(conn, plan)  # committed
        if result.snapshot_seq >= 1_500:
            print("piece", result.snapshot_seq, flush=True)
            time.sleep(60)  # the event loop stops here: the kill comes between two pieces
        return result

    async def main(path):
        compaction.write_piece = write_piece
        compaction.PIECE_RECORDS = 500
        j = await Journal.open(path, durability="normal")
        for v in range(1, 1_001):
            records = [Schedule(f"k{v % 700}", v, "h", 1.0, None, 1.0)]
            if v % 2:
                records += [Attempt(f"k{v % 700}", v, 1, 2.0), Ack(f"k{v % 700}", v, 3.0)]
            await j.submit(records)
        print("submitted", j.last_seq, flush=True)
        await j.compact(retention=0.0, now=10.0)

    asyncio.run(main(sys.argv[1]))
    """
)


def expected_records() -> list[Record]:
    records: list[Record] = []
    for v in range(1, 1_001):
        records.append(Schedule(f"k{v % 700}", v, "h", 1.0, None, 1.0))
        if v % 2:
            records += [Attempt(f"k{v % 700}", v, 1, 2.0), Ack(f"k{v % 700}", v, 3.0)]
    return records


def kill_when(child: str, db: str, marker: str) -> list[str]:
    """Run ``child`` on ``db`` until it prints a line starting with ``marker`` (or a minute
    passes), SIGKILL it there; the lines it printed."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", child, db], stdout=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + 60
    try:
        for line in proc.stdout:
            lines.append(line.strip())
            if line.startswith(marker) or time.monotonic() > deadline:
                break
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
    return lines


@pytest.mark.slow
async def test_sigkill_between_two_pieces_recovers_the_same_state(db: str) -> None:
    lines = kill_when(CHILD, db, "piece")
    assert [line.split()[0] for line in lines] == ["submitted", "piece"]
    records = expected_records()
    snapshot, tail, meta = stored(db)
    assert meta["snapshot_seq"] == 1_500  # pieces of 500: the third one was the last written
    assert len(tail) == len(records) - 1_500 and tail[0][0] == 1_501
    want = model(records)
    finished = {k for k, row in want.items() if row.state in ("SUCCEEDED", "CANCELED")}
    j = await Journal.open(db)  # the lock died with the process
    try:
        assert (await j.check()).ok
        rec = await j.recover()
        assert rec.max_version == 1_000
        # finished timers folded by the pieces written may have been dropped by nothing yet:
        # only the last piece applies retention, so the state is the whole fold
        assert rec.timers == want
        assert len(snapshot) == meta["snapshot_rows"]
        result = await j.compact(retention=0.0, now=10.0)  # and it compacts on from there
        assert result.pieces == 1 and result.dropped_timers == len(finished)
        rec = await j.recover()
        assert rec.timers == {k: row for k, row in want.items() if k not in finished}
    finally:
        await j.close()


async def expired_journal(db: str, keys: int) -> Journal:
    """``keys`` timers scheduled and acked, folded into the snapshot with nothing dropped, and
    one more record touching the first key: a compaction at retention 0 folds one record and
    drops every other stored row as expired (step 3b)."""
    j = await Journal.open(db, durability="normal")
    await j.submit([Schedule(f"k{i}", i + 1, "h", 1.0, None, 1.0) for i in range(keys)])
    await j.submit([Ack(f"k{i}", i + 1, 2.0) for i in range(keys)])
    await j.compact(retention=math.inf, now=3.0)
    await j.submit([Schedule("k0", keys + 1, "h", 9.0, None, 4.0)])  # k0 lives on
    return j


async def test_retention_drops_a_piece_at_a_time_with_commits_between(
    db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    j = await expired_journal(db, 1_000)
    dropped = compaction.drop_expired
    late: list[asyncio.Future[None]] = []
    seen: list[tuple[bool, int]] = []

    async def drop_expired(conn: Any, plan: CompactionPlan, keys: Any, live: int) -> Any:
        seen.append((all(fut.done() for fut in late), len(keys)))  # committed in between
        late.append(j.submit([Schedule(f"new{len(late)}", 5_000 + len(late), "h", 1.0, None, 1.0)]))
        return await dropped(conn, plan=plan, keys=keys, live=live)

    monkeypatch.setattr(compaction, "drop_expired", drop_expired)
    monkeypatch.setattr(compaction, "PIECE_RECORDS", 300)
    result = await j.compact(retention=0.0, now=5.0)
    assert (result.pieces, result.drop_pieces) == (1, 4)  # 999 expired rows, 300 a transaction
    assert seen == [(True, 300), (True, 300), (True, 300), (True, 99)]
    assert (result.dropped_timers, result.live_rows) == (999, 1)
    await asyncio.gather(*late)
    _snapshot, _tail, meta = stored(db)
    assert meta["snapshot_rows"] == 1 and (await j.check()).ok
    rec = await j.recover()
    assert sorted(rec.timers) == ["k0", *sorted(f"new{i}" for i in range(len(late)))]
    assert rec.timers["k0"].state == "PENDING"
    await j.close()


DROP_CHILD = textwrap.dedent(
    """
    import asyncio, math, sys, time
    import journal.compaction as compaction
    from journal import Journal
    from journal.records import Ack, Schedule

    dropped = compaction.drop_expired

    async def drop_expired(conn, plan, keys, live):
        result = await dropped(conn, plan=plan, keys=keys, live=live)  # committed
        print("dropped", result.live_rows, flush=True)
        time.sleep(60)  # the event loop stops here: the kill comes between two drops
        return result

    async def main(path):
        compaction.drop_expired = drop_expired
        compaction.PIECE_RECORDS = 300
        j = await Journal.open(path, durability="normal")
        await j.submit([Schedule(f"k{i}", i + 1, "h", 1.0, None, 1.0) for i in range(1_000)])
        await j.submit([Ack(f"k{i}", i + 1, 2.0) for i in range(1_000)])
        await j.compact(retention=math.inf, now=3.0)
        await j.submit([Schedule("k0", 1_001, "h", 9.0, None, 4.0)])
        print("submitted", flush=True)
        await j.compact(retention=0.0, now=5.0)

    asyncio.run(main(sys.argv[1]))
    """
)


@pytest.mark.slow
async def test_sigkill_between_two_drops_recovers_the_same_state(db: str) -> None:
    lines = kill_when(DROP_CHILD, db, "dropped")
    assert lines == ["submitted", "dropped 700"]  # the fold, then 300 of 999 expired rows
    snapshot, tail, meta = stored(db)
    assert len(snapshot) == meta["snapshot_rows"] == 700 and tail == []
    j = await Journal.open(db)  # the lock died with the process
    try:
        assert (await j.check()).ok
        rec = await j.recover()
        # what is left of the expired rows is as the acks left it: only retention is late
        assert len(rec.timers) == 700 and rec.timers["k0"].state == "PENDING"
        assert all(row.state == "SUCCEEDED" for key, row in rec.timers.items() if key != "k0")
        result = await j.compact(retention=0.0, now=5.0)  # and it finishes the job
        assert (result.dropped_timers, result.live_rows) == (699, 1)
        assert sorted((await j.recover()).timers) == ["k0"]
    finally:
        await j.close()
