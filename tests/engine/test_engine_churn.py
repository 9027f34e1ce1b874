"""Churn (SPEC guarantee 9): journal rows, file bytes and memory stay bounded by the live timers
plus the retention window, for schedule/cancel, schedule/fire and replace churn alike.

Each test keeps ``LIVE`` timers alive on a real SQLite file with a virtual clock, runs ``OPS``
operations in two halves and measures after each: the second half must find no more than the
bound, which does not depend on how many operations ran. Memory is traced (tracemalloc) over
the second half only: what that half allocated and still holds is the engine's steady state.
Before the fix, 200,000 schedule/cancel operations left 200,100 records (11.6 MB) and 100,100
finished timers in memory, growing with every operation; the figures now are in
``docs/design.md`` ("Compaction trigger"). ``pytest -s`` prints them.
"""

from __future__ import annotations

import asyncio
import gc
import os
import sqlite3
import tracemalloc
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from wheel_engine import Engine
from wheel_engine.testing import VirtualClock

LIVE = 100  # timers that stay pending all along
WINDOW = 1_000  # max_retained: the window of finished timers kept readable
MIN_RECORDS = 2_000  # compact_min_records
OPS = 100_000  # operations per test (each schedule, cancel or firing is one)
BATCH = 500  # operations per schedule_many / gather
MAIN_BYTES_BOUND = 2 * 1024 * 1024  # the journal file itself (the WAL is bounded by SQLite)
WAL_BYTES_BOUND = 9 * 1024 * 1024  # journal_size_limit (8 MiB) plus one checkpoint's slack
MEMORY_BOUND = 4 * 1024 * 1024  # held by the second half's allocations (the window's timers)


@dataclass
class Footprint:
    rows: int  # snapshot rows + tail records
    main_bytes: int
    wal_bytes: int
    timers: int  # len(engine._table.timers): live + window
    finished: int  # len(engine._table.finished): the window


async def footprint(engine: Engine, path: Path) -> Footprint:
    await engine.quiesce()
    while engine._commits.compacting is not None:
        await asyncio.shield(engine._commits.compacting)
        await engine.quiesce()
    con = sqlite3.connect(path)
    try:
        (rows,) = con.execute(
            "SELECT (SELECT count(*) FROM snapshot) + (SELECT count(*) FROM records)"
        ).fetchone()
    finally:
        con.close()
    wal = Path(f"{path}-wal")
    return Footprint(
        rows=rows,
        main_bytes=os.path.getsize(path),
        wal_bytes=wal.stat().st_size if wal.exists() else 0,
        timers=len(engine._table.timers),
        finished=len(engine._table.finished),
    )


Churn = Callable[[Engine, VirtualClock, int], Awaitable[None]]


async def run_churn(
    tmp_path: Path, churn: Churn, window: int = WINDOW, **options: object
) -> tuple[Footprint, int]:
    """Two halves of ``OPS`` operations, with at most ``window`` finished timers kept; returns
    the footprint after the second and the bytes the second half allocated and still holds."""
    path = tmp_path / "churn.db"
    clock = VirtualClock()
    engine = Engine(
        path,
        clock=clock,
        durability="normal",
        max_retained=window,
        compact_min_records=MIN_RECORDS,
        **options,  # type: ignore[arg-type]
    )
    engine.register("h", lambda firing: None)
    async with engine:
        await engine.schedule_many(
            [{"handler": "h", "delay": 1e6, "key": f"live{i}"} for i in range(LIVE)]
        )
        await churn(engine, clock, 0)
        first = await footprint(engine, path)
        check(first, window)
        gc.collect()
        tracemalloc.start()
        try:
            await churn(engine, clock, OPS // 2)
            second = await footprint(engine, path)
            gc.collect()
            held = tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
        check(second, window)
        print(f"held by the second half: {held / 1e6:.2f} MB")
        assert engine.stats()["pending"] >= LIVE and not engine._commits.committing
    return second, held


def check(seen: Footprint, window: int) -> None:
    """The bounds: live timers (and the replaced keys) plus the window, whatever ran before."""
    # Once the compactions have caught up, the tail is at most the compaction trigger's count
    # (plus a batch of acks committed after it).
    tail = max(MIN_RECORDS, 2 * (2 * LIVE + window)) + 2 * BATCH
    assert seen.rows <= 2 * LIVE + window + tail, seen
    assert seen.main_bytes <= MAIN_BYTES_BOUND, seen
    assert seen.wal_bytes <= WAL_BYTES_BOUND, seen
    assert seen.timers <= 2 * LIVE + window, seen
    assert seen.finished <= window, seen
    print(seen)  # the figures for the notes (pytest -s)


async def schedule_cancel(engine: Engine, clock: VirtualClock, start: int) -> None:
    for first in range(start, start + OPS // 2, 2 * BATCH):
        keys = [f"c{n}" for n in range(first, first + BATCH)]
        await engine.schedule_many([{"handler": "h", "delay": 60, "key": key} for key in keys])
        await asyncio.gather(*(engine.cancel(key) for key in keys))


async def schedule_fire(engine: Engine, clock: VirtualClock, start: int) -> None:
    for first in range(start, start + OPS // 2, BATCH):
        await engine.schedule_many(
            [{"handler": "h", "delay": 0.001, "key": f"f{n}"} for n in range(first, first + BATCH)]
        )
        await clock.advance(0.01)


async def replace(engine: Engine, clock: VirtualClock, start: int) -> None:
    for first in range(start, start + OPS // 2, BATCH):
        await engine.schedule_many(
            [
                {"handler": "h", "delay": 60, "key": f"r{n % LIVE}"}
                for n in range(first, first + BATCH)
            ]
        )


async def test_schedule_cancel_churn_stays_bounded(tmp_path: Path) -> None:
    seen, held = await run_churn(tmp_path, schedule_cancel)
    assert seen.finished == WINDOW  # the window is full, and no fuller
    assert held <= MEMORY_BOUND, held


async def test_schedule_fire_churn_stays_bounded(tmp_path: Path) -> None:
    seen, held = await run_churn(tmp_path, schedule_fire)
    assert seen.finished == WINDOW
    assert held <= MEMORY_BOUND, held


async def test_replace_churn_stays_bounded(tmp_path: Path) -> None:
    seen, held = await run_churn(tmp_path, replace)
    assert seen.timers == 2 * LIVE and seen.finished == 0
    assert held <= MEMORY_BOUND, held


async def test_time_window_churn_stays_bounded(tmp_path: Path) -> None:
    """The window by time: with retention=2 s and a batch fired every second, at most three
    batches are kept, though ``max_retained`` would allow many more."""

    async def fire_each_second(engine: Engine, clock: VirtualClock, start: int) -> None:
        for first in range(start, start + OPS // 2, BATCH):
            await engine.schedule_many(
                [
                    {"handler": "h", "delay": 0.5, "key": f"t{n}"}
                    for n in range(first, first + BATCH)
                ]
            )
            await clock.advance(1.0)

    seen, held = await run_churn(tmp_path, fire_each_second, 3 * BATCH, retention=2.0)
    assert seen.finished <= 3 * BATCH
    assert held <= MEMORY_BOUND, held
