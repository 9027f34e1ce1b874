"""Micro benchmarks of recovery and of memory per pending timer (issue #10).

Run: ``.venv/bin/python -m pytest bench/test_bench_recovery.py --benchmark-only -q``

- Recovery per timer: a journal of :data:`TIMERS` pending timers written by the engine itself,
  then read back into engine timers and a wheel (``recover_sync`` + ``TimerTable.restore``, the
  work of ``Engine.start()`` without opening the journal for writing), next to the least any
  recovery does on the same file (``sqlite3`` read + ``msgpack`` decode of every row) and to
  the journal's own rows (``TimerRow``, what the CLI reads). Look at the ratios.
- Bytes per pending timer: an in-memory engine holding :data:`MEMORY_TIMERS` timers against
  asyncio's ``TimerHandle`` in the same run, each in a fresh subprocess (``bench.compare.
  memory``); the figures are in each benchmark's ``extra_info`` (the time is not the point).

Per-timer figures are in ``extra_info`` too (``us_per_timer``, ``bytes_per_timer``). On a
loaded machine add ``--benchmark-timer=time.process_time`` (CPU time, the recovery thread's
included) for steadier ratios.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bench.compare import memory, peers
from bench.compare.inmemory import BATCH
from journal.recovery import recover_sync
from wheel_engine import Engine
from wheel_engine.timers import TimerTable

#: Pending timers in the recovery benchmarks' journal.
TIMERS = 100_000
#: Pending timers held for the memory figures (1M in ``wheel-engine bench``; smaller here).
MEMORY_TIMERS = 200_000
#: The handler every benchmark timer names.
HANDLER = "bench"


@pytest.fixture(scope="module")
def journal_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A journal with :data:`TIMERS` pending timers, due an hour from now, written by the
    engine's own ``schedule_many`` (durability normal)."""
    path = tmp_path_factory.mktemp("recovery") / "timers.db"

    async def write() -> None:
        engine = Engine(str(path), durability="normal")
        engine.register(HANDLER, lambda firing: None)
        async with engine:
            base = time.time() + 3600.0
            for start in range(0, TIMERS, BATCH):
                await engine.schedule_many(
                    [
                        {"handler": HANDLER, "at": base + i * 1e-3}
                        for i in range(start, start + BATCH)
                    ]
                )

    asyncio.run(write())
    return path


def _recover_into_table(path: Path) -> TimerTable:
    """What ``Engine.start()`` does with the journal's rows, the cyclic collector paused as
    there: read every row into an engine timer, then load the wheel."""
    registered: dict[str, Any] = {HANDLER: None}  # restore only asks whether a name is known
    table = TimerTable(registered, tick=0.001, retention=3600.0, max_retained=1_000_000)
    now = time.time()
    table.start_wheel(now)
    gc.disable()
    try:
        table.restore(_recover_timers(str(path)), now, str(path))
    finally:
        gc.enable()
    assert table.pending() == TIMERS
    return table


def _recover_timers(path: str) -> Any:
    """``recover_sync`` building engine timers; on code before the row factory (to measure
    the before figures with this same file), the journal's rows that restore converted."""
    try:
        from wheel_engine.timer import recovered_timer  # type: ignore[attr-defined,unused-ignore]
    except ImportError:
        return recover_sync(path)
    return recover_sync(path, None, recovered_timer)


def _per_timer(benchmark: Any, fn: Callable[[], object]) -> None:
    benchmark.pedantic(fn, rounds=5, iterations=1, warmup_rounds=1)
    if benchmark.stats is not None:  # None under --benchmark-disable (a plain test run)
        median = benchmark.stats.stats.median
        benchmark.extra_info["us_per_timer"] = round(median / TIMERS * 1e6, 3)


def test_recovery_into_engine_timers(benchmark: Any, journal_path: Path) -> None:
    """Recovery per timer: the journal's rows into engine timers, indexed and in the wheel."""
    _per_timer(benchmark, lambda: _recover_into_table(journal_path))


def test_recovery_journal_rows(benchmark: Any, journal_path: Path) -> None:
    """The journal alone: every row folded into a ``TimerRow`` (what the CLI reads)."""
    _per_timer(benchmark, lambda: recover_sync(str(journal_path)))


def test_recovery_raw_read_and_decode(benchmark: Any, journal_path: Path) -> None:
    """Baseline: ``sqlite3`` reads every row, ``msgpack`` decodes every blob, nothing is kept."""
    _per_timer(benchmark, lambda: peers.raw_read_decode(journal_path))


@pytest.mark.parametrize("kind", ["engine", "asyncio"])
def test_bytes_per_pending_timer(benchmark: Any, kind: str) -> None:
    """Bytes per pending timer (RSS delta of a fresh process, after gc): the engine's
    in-memory timers against asyncio's ``TimerHandle`` in the same run."""
    result: dict[str, Any] = {}

    def measure() -> None:
        result.update(memory.in_subprocess(kind, MEMORY_TIMERS))

    benchmark.pedantic(measure, rounds=1, iterations=1)
    benchmark.extra_info["bytes_per_timer"] = round(result["bytes_per_timer"], 1)
    benchmark.extra_info["method"] = memory.METHOD
