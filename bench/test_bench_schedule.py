"""Micro benchmarks of the schedule path: ``schedule_many`` and ``schedule()``, per timer.

Run: ``.venv/bin/python -m pytest bench/test_bench_schedule.py --benchmark-only -q``

Every figure handles ``N`` timers (``extra_info["timers"]``; divide by it for the cost per timer),
each due an hour ahead so nothing fires, on a fresh engine per round. Durable engines write a
fresh journal in pytest's ``tmp_path`` with ``durability="normal"`` unless the name says
``full`` (an fsync per commit, which depends on the disk more than on the engine); raw
``sqlite3`` ``executemany`` of the same number of msgpack rows, 1,000 a transaction, is in the
same run to divide by. The side-by-side figures with spread are ``wheel-engine bench --only
durable``; these are for one path at a time, before/after a change.

- schedule_many: batches of 1,000, awaited one after the other, in memory and durable.
- schedule concurrent: ``N`` awaited ``schedule()`` calls under one ``asyncio.gather``.
- schedule one by one: in memory, each awaited before the next.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import sqlite3
import time
from pathlib import Path
from typing import Any, Literal

import msgpack
import pytest

from wheel_engine import Engine

N = 10_000
BATCH = 1_000  # the batch of the target (durable schedule_many vs raw executemany)
ROUNDS = 5
H = "bench"

_files = itertools.count()


def _requests(start: int, stop: int, base: float) -> list[dict[str, Any]]:
    return [{"handler": H, "at": base + i * 1e-4} for i in range(start, stop)]


def _run_on_engine(
    benchmark: Any,
    loop: asyncio.AbstractEventLoop,
    work: Any,
    path: Path | None,
    durability: Literal["full", "normal"] = "normal",
) -> None:
    """Benchmark ``await work(engine)`` on a fresh started engine per round (its start and
    close are not timed); a durable one writes a new journal under ``path`` each round. The
    previous round's engine is closed and the heap collected first, so rounds start alike."""
    engines: list[Engine] = []

    def setup() -> tuple[tuple[Engine], dict[str, Any]]:
        if engines:
            loop.run_until_complete(engines.pop().close())
        gc.collect()
        db = None if path is None else path / f"bench-{next(_files)}.db"
        engine = Engine(db, durability=durability)
        engine.register(H, lambda firing: None)  # nothing fires: every timer is an hour ahead
        loop.run_until_complete(engine.start())
        engines.append(engine)
        return (engine,), {}

    def run(engine: Engine) -> None:
        loop.run_until_complete(work(engine))

    benchmark.extra_info["timers"] = N
    benchmark.pedantic(run, setup=setup, rounds=ROUNDS)
    for engine in engines:
        loop.run_until_complete(engine.close())  # idempotent


async def _many(engine: Engine) -> None:
    base = time.time() + 3600.0
    for start in range(0, N, BATCH):
        await engine.schedule_many(_requests(start, start + BATCH, base))


async def _concurrent(engine: Engine) -> None:
    base = time.time() + 3600.0
    await asyncio.gather(*(engine.schedule(H, at=base + i * 1e-4) for i in range(N)))


async def _one_by_one(engine: Engine) -> None:
    base = time.time() + 3600.0
    schedule = engine.schedule
    for i in range(N):
        await schedule(H, at=base + i * 1e-4)


# -- schedule_many ----------------------------------------------------------------------------


def test_schedule_many_in_memory(benchmark: Any, loop: asyncio.AbstractEventLoop) -> None:
    _run_on_engine(benchmark, loop, _many, None)


def test_schedule_many_durable(
    benchmark: Any, loop: asyncio.AbstractEventLoop, tmp_path: Path
) -> None:
    _run_on_engine(benchmark, loop, _many, tmp_path)


def test_raw_executemany(benchmark: Any, tmp_path: Path) -> None:
    """The peer of ``schedule_many`` durable: msgpack rows, 1,000 a transaction, WAL, NORMAL."""

    def setup() -> tuple[tuple[sqlite3.Connection], dict[str, Any]]:
        gc.collect()
        conn = sqlite3.connect(tmp_path / f"raw-{next(_files)}.db", isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("CREATE TABLE records (seq INTEGER PRIMARY KEY, kind INTEGER, body BLOB)")
        return (conn,), {}

    def run(conn: sqlite3.Connection) -> None:
        base = time.time() + 3600.0
        packb = msgpack.packb
        for start in range(0, N, BATCH):
            at = time.time()
            rows = [
                (1, packb((f"k{i}", i + 1, H, base + i * 1e-4, None, at)))
                for i in range(start, start + BATCH)
            ]
            conn.execute("BEGIN")
            conn.executemany("INSERT INTO records (kind, body) VALUES (?, ?)", rows)
            conn.execute("COMMIT")
        conn.close()

    benchmark.extra_info["timers"] = N
    benchmark.pedantic(run, setup=setup, rounds=ROUNDS)


# -- schedule() -------------------------------------------------------------------------------


@pytest.mark.parametrize("durability", ["normal", "full"])
def test_schedule_concurrent_durable(
    benchmark: Any,
    loop: asyncio.AbstractEventLoop,
    tmp_path: Path,
    durability: Literal["full", "normal"],
) -> None:
    _run_on_engine(benchmark, loop, _concurrent, tmp_path, durability)


def test_schedule_concurrent_in_memory(benchmark: Any, loop: asyncio.AbstractEventLoop) -> None:
    _run_on_engine(benchmark, loop, _concurrent, None)


def test_schedule_one_by_one_in_memory(benchmark: Any, loop: asyncio.AbstractEventLoop) -> None:
    _run_on_engine(benchmark, loop, _one_by_one, None)
