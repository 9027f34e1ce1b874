"""bench.compare.mass_expiry (figure 10): registered, quick sizes that keep ``make bench-quick``
quick, one side measured for real at a tiny size, and the report's shape: B alone as the
anchor, A's columns beside, the two targets of issue 26."""

from __future__ import annotations

import asyncio
import gc
import io
from pathlib import Path
from typing import Any

import pytest

from bench.compare import FIGURES, mass_expiry
from bench.compare.config import Config
from bench.compare.measure import Log, Metrics
from bench.compare.report import format_comparison
from bench.compare.targets import evaluate_targets
from journal import Journal
from journal.records import Schedule


def _cfg(quick: bool, tmp_path: Path) -> Config:
    return Config.make(quick, tmp_path, Log(io.StringIO(), verbose=False))


def test_the_figure_is_number_ten_and_quick_stays_small(tmp_path: Path) -> None:
    assert FIGURES["mass_expiry"] == ("10", "mass_expiry")
    quick = mass_expiry.Sizes.of(_cfg(True, tmp_path))
    full = mass_expiry.Sizes.of(_cfg(False, tmp_path))
    assert quick.reps == 1 and quick.timers <= 20_000 and quick.ideal <= 5.0
    assert (full.timers, full.rate, full.ideal) == (500_000, 20_000.0, 25.0)  # issue 26's


def test_one_side_measures_a_and_b_at_a_tiny_size(tmp_path: Path) -> None:
    timers, rate, window = 600, 1_000.0, 0.5
    got = asyncio.run(mass_expiry._side(tmp_path / "j.db", timers, rate, window))
    assert got["b_timers"] == round(window / mass_expiry.B_EVERY)
    assert 0.0 <= got["p50"] <= got["p99"] <= got["max"]
    assert got["a_seconds"] > 0 and got["a_x_ideal"] == pytest.approx(
        got["a_seconds"] / (timers / rate)
    )
    # The burst (rate tokens) in the first second, then the rate: never more than both.
    assert 0 < got["peak_rate"] <= 2 * rate + 1
    assert got["rss_mb"] > 0


def test_the_report_has_b_alone_as_anchor_and_the_targets(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def measured(
        path: Path, timers: int, sizes: mass_expiry.Sizes, isolated: bool = False
    ) -> Metrics:
        beside = timers > 0
        return {
            "p99": 0.03 if beside else 0.01,
            "a_seconds": sizes.ideal * 1.05 if beside else 0.0,
            "a_x_ideal": 1.05 if beside else 0.0,
            "peak_rate": 2 * sizes.rate if beside else 0,
            "rss_mb": 400.0 if beside else 30.0,
        }

    monkeypatch.setattr(mass_expiry, "_in_subprocess", measured)
    monkeypatch.setattr(mass_expiry, "engine_missing", lambda durable: None)
    cfg = _cfg(True, tmp_path)
    series: dict[str, Any] = {}
    (comp,) = mass_expiry.run(cfg, series)
    assert (comp.key, comp.figure, comp.anchor) == ("mass_expiry", "10", mass_expiry.ALONE)
    assert comp.extra_metrics == ["a_seconds", "a_x_ideal", "peak_rate", "rss_mb"]
    assert comp.ratios[mass_expiry.BESIDE].median == pytest.approx(1 / 3)  # 10 ms over 30 ms
    isolated = comp.result(mass_expiry.ISOLATED)
    assert isolated is not None and isolated.skipped == "the full run only"  # quick: two sides
    text = format_comparison(comp)
    assert "Figure 10" in text and mass_expiry.BESIDE in text and "a_x_ideal" in text
    results = evaluate_targets(mass_expiry.targets(cfg), {comp.key: comp})
    assert [r.status for r in results] == ["missed", "met"]  # within 2x: no; under 50 ms: yes


async def test_the_watch_counts_full_collections_and_compactions(tmp_path: Path) -> None:
    j = await Journal.open(str(tmp_path / "w.db"))
    with mass_expiry._Watch() as watch:
        gc.collect()
        await j.submit([Schedule("k", 1, "h", 1.0, None, 1.0)])
        await j.compact(retention=0.0, now=0.0)
    await j.compact(retention=0.0, now=0.0)  # after the side: not counted
    await j.close()
    got = watch.metrics()
    assert got["gc_full"] >= 1 and 0 < got["gc_full_max_s"] <= got["gc_full_s"]
    assert got["compactions"] == 1 and got["compaction_hold_max_s"] > 0
