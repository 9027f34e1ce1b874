"""The results section of docs/benchmarks.md, alone and with another build's run beside it."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.compare import beside, report
from bench.compare.markdown import format_markdown
from bench.compare.measure import Comparison, ContenderResult, Ratio
from bench.compare.tables import Results
from bench.compare.targets import TargetResult

TARGET = "durable schedule_many (full) vs raw sqlite3"


def machine(build: str) -> dict[str, object]:
    return {
        "nproc": 2,
        "cpu": "test CPU",
        "python": "3.11.7",
        "sqlite": "3.40.1",
        "platform": "Linux",
        "versions": {"wheel-engine": "0.1.0"},
        "git_commit": "abc1234",
        "date_utc": "2026-12-01T12:00:00Z",
        "build": build,
    }


def durable(ratio: float) -> Comparison:
    raw, eng = "raw sqlite3 (full, 1,000/txn)", "wheel-engine schedule_many (full)"
    results = [
        ContenderResult(raw, reps=[{"rate": 600e3}, {"rate": 600e3}]),
        ContenderResult(eng, reps=[{"rate": 600e3 * ratio}, {"rate": 600e3 * ratio * 1.1}]),
    ]
    ratios = {raw: Ratio(1.0, 1.0, 1.0, 2), eng: Ratio(ratio * 1.05, ratio, ratio * 1.1, 2)}
    return Comparison(
        "durable.full", "4", "durable", "rate", "timers/s", True, raw, {"n": 100}, results, ratios
    )


def run(build: str, ratio: float, other: beside.Beside | None = None) -> Results:
    target = TargetResult(
        TARGET, "met" if ratio >= 0.4 else "missed", ratio, 0.4, 0.6, False, f"{ratio}x (spread)"
    )
    table = {
        "figure": "4",
        "title": "a series of figure 4",
        "header": ["N", "x"],
        "rows": [["10", "1"]],
        "notes": ["n1"],
    }
    series = {"made_up": {"table": table}}
    return Results([durable(ratio)], [target], machine(build), "cmd", 1.0, series, False, other)


def test_the_build_is_said_and_a_series_table_follows_its_figure() -> None:
    md = format_markdown(run("compiled", 0.5))
    assert "commit abc1234, compiled build." in md
    assert "| target | status | result (compiled build) |" in md
    assert md.index("### Figure 4: durable") < md.index("### Figure 4: a series of figure 4")
    assert "| 10 | 1 |" in md and "- n1" in md


def test_a_pure_run_beside_the_compiled_one(tmp_path: Path) -> None:
    pure = tmp_path / "results.json"
    report.write_json(pure, run("pure", 0.25))
    other = beside.load(pure)
    assert other.column == "pure build"
    md = format_markdown(run("compiled", 0.5, other))
    assert (
        f"Beside: the pure build (`cmd`, 2026-12-01T12:00:00Z, commit abc1234, from {pure})" in md
    )
    assert "| target | status | result (compiled build) | pure build: status, result |" in md
    assert (
        f"| {TARGET} (>= 0.4x) | met (goal 0.6x not yet) | 0.5x (spread) | missed: 0.25x (spread) |"
        in md
    )
    assert "| ratio (pure build) |" in md
    # the other run's ratio of the same contender, with its spread
    assert "| **0.53x** | 0.50-0.55 | 2 | 0.26x (0.25-0.28) |" in md


def test_beside_refuses_a_file_that_is_not_results_json(tmp_path: Path) -> None:
    bad = tmp_path / "x.json"
    bad.write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(ValueError, match=r"not a results\.json"):
        beside.load(bad)
    bad.write_text("{", encoding="utf-8")
    with pytest.raises(ValueError, match=r"not a results\.json"):
        beside.load(bad)
