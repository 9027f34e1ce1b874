"""The floor script of figure 4 at toy sizes: each workload runs and reports a rate."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bench.compare import concurrent_floor


def test_asyncio_alone_and_the_engine_each_complete_every_call(tmp_path: Path) -> None:
    assert asyncio.run(concurrent_floor.floor_calls(50)) > 0
    assert asyncio.run(concurrent_floor.engine_calls(tmp_path / "calls.db", 50)) > 0


def test_an_unknown_mode_prints_the_usage() -> None:
    assert concurrent_floor.main(["nonsense"]) == 2
