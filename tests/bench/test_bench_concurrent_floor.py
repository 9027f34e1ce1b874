"""The floor script of figure 4 at toy sizes: each workload runs and reports a rate."""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path

import pytest

from bench.compare import concurrent_floor


def test_asyncio_alone_and_the_engine_each_complete_every_call(tmp_path: Path) -> None:
    assert asyncio.run(concurrent_floor.floor_calls(50)) > 0
    assert asyncio.run(concurrent_floor.engine_calls(tmp_path / "calls.db", 50)) > 0


def test_an_unknown_mode_prints_the_usage() -> None:
    assert concurrent_floor.main(["nonsense"]) == 2


def test_the_full_collections_of_a_burst_are_counted_and_timed() -> None:
    with concurrent_floor.Collections() as seen:
        gc.collect(1)  # a middle collection is not a full one
        gc.collect()
    count, seconds = seen.full()
    assert count == 1
    assert seconds > 0
    gc.collect()
    assert seen.full()[0] == 1  # no longer observed once left


def test_the_heap_sweep_runs_each_workload_at_each_size(capsys: pytest.CaptureFixture[str]) -> None:
    concurrent_floor.heap(n=50, sizes=(0, 1_000))
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(" more")[0].strip() for line in lines] == ["0", "1,000"]
    assert all("asyncio alone" in line and "engine" in line for line in lines)
