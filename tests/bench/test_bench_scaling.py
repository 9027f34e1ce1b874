"""Figure 7 end to end at toy sizes: what it reports, not how fast (real time: marked slow)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from bench.compare.config import Config
from bench.compare.measure import Log
from bench.compare.scaling import ASYNCIO, ENGINE, OPS, measure_all

HUGE = 10**13  #: pending timers no machine has the memory for


@pytest.mark.slow
def test_every_size_is_measured_on_both_sides_or_skipped_for_memory() -> None:
    cfg = Config.make(True, Path("."), Log(io.StringIO(), verbose=False))
    cfg.scale_sizes, cfg.scale_ops, cfg.scale_window, cfg.scale_reps = (
        [200, 1_000, HUGE],
        300,
        0.01,
        2,
    )
    comps, data = measure_all(cfg, close=True)
    by_key = {c.key: c for c in comps}
    assert sorted(by_key) == sorted(f"scaling.{op}.{n}" for op in OPS for n in cfg.scale_sizes)
    for op in OPS:
        for n in (200, 1_000):
            comp = by_key[f"scaling.{op}.{n}"]
            assert comp.params["sweep"] and comp.anchor == ASYNCIO[op]
            for name in (ENGINE[op], ASYNCIO[op]):
                res = comp.result(name)
                assert res is not None and res.ok, (name, res)
                assert len(res.values("cpu_per_timer")) == 2
                assert res.values("leaked") == [0, 0]  # a cancelled timer never fired
        huge = by_key[f"scaling.{op}.{HUGE}"]
        assert all(
            r.skipped and r.skipped.startswith("does not fit: needs about") for r in huge.results
        )
    assert list(data["skipped"]) == [str(HUGE)]
    assert sorted(data["staging_cpu_s"]) == ["1000", "200"]  # idle staging, waited out
    table = data["table"]
    assert table["figure"] == "7" and len(table["rows"]) == 3
    assert table["rows"][2] == [f"{HUGE:,}", *["skipped", "skipped", "-"] * len(OPS)]
    assert set(data["points"]) == {*ENGINE.values(), *ASYNCIO.values()}
