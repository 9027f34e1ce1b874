"""bench.compare.burst_phases: the phases of a burst add up to it, the collections inside."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bench.compare import burst_phases, concurrent_floor


def test_engine_burst_has_every_phase_and_each_takes_time(tmp_path: Path) -> None:
    phases = burst_phases.engine_burst(tmp_path / "j.db", 200)
    got = asyncio.run(phases)
    assert list(got) == ["gather", "first", "commit", "resolve", "second"]
    for ms, young, middle, full in got.values():
        assert ms >= 0 and 0 <= young + middle + full <= ms + 1e-6
    assert got["commit"][0] > 0


def test_floor_burst_has_no_commit() -> None:
    got = asyncio.run(burst_phases.floor_burst(200))
    assert list(got) == ["gather", "first", "resolve", "second"]


def test_collections_are_split_at_the_marks() -> None:
    seen = concurrent_floor.Collections()
    seen.runs = [(0, 1.0, 1.002), (2, 1.009, 1.013)]  # a young one in a, a full one across a-b
    phases = burst_phases.phases(seen, [("a", 1.0), ("b", 1.01), ("end", 1.02)])
    assert [round(x, 3) for x in phases["a"]] == [10.0, 2.0, 0.0, 1.0]
    assert [round(x, 3) for x in phases["b"]] == [10.0, 0.0, 0.0, 3.0]
