"""The targets: each reported as met, missed or not measured, always with its spread."""

from __future__ import annotations

import io
from pathlib import Path

from bench.compare.config import Config
from bench.compare.measure import Comparison, ContenderResult, Log, Ratio
from bench.compare.scaling import ASYNCIO, ENGINE, key, targets
from bench.compare.targets import Target, evaluate_targets

WHEEL, HEAP = ENGINE["fire"], ASYNCIO["fire"]


def cpu(key_: str, values: dict[str, list[float]], anchor: str = HEAP) -> Comparison:
    """A CPU-per-timer comparison (lower is better), ratios per round as measure takes them."""
    results = [
        ContenderResult(name, reps=[{"cpu_per_timer": v} for v in vs])
        for name, vs in values.items()
    ]
    ratios = {}
    for name, vs in values.items():
        per = [a / v for v, a in zip(vs, values[anchor], strict=True)]
        ratios[name] = Ratio(sorted(per)[len(per) // 2], min(per), max(per), len(per))
    return Comparison(key_, "7", "t", "cpu_per_timer", "s", False, anchor, {}, results, ratios)


def quick_cfg() -> Config:
    return Config.make(True, Path("."), Log(io.StringIO(), verbose=False))


def test_growth_is_the_largest_size_over_the_smallest_with_the_peer_beside() -> None:
    cfg = quick_cfg()
    small, large = min(cfg.scale_sizes), max(cfg.scale_sizes)
    comps = {
        key("fire", small): cpu(
            key("fire", small), {HEAP: [2e-6, 2e-6, 2e-6], WHEEL: [3e-6, 3e-6, 4e-6]}
        ),
        key("fire", large): cpu(
            key("fire", large), {HEAP: [4e-6, 5e-6, 6e-6], WHEEL: [3e-6, 4e-6, 4e-6]}
        ),
    }
    fire, cancel = evaluate_targets(targets(cfg), comps)
    assert fire.status == "met" and fire.threshold == "<= 1.5x"
    assert fire.value == 4e-6 / 3e-6
    # the spread is the widest the rounds allow: smallest over largest, largest over smallest
    assert fire.detail.startswith("1.33x (spread 0.75-1.33, 3+3 rounds)")
    assert f"{HEAP}: 2.50x (spread 2.00-3.00, 3+3 rounds)" in fire.detail
    assert cancel.status == "not measured" and cancel.detail == "figure not run"


def test_growth_past_the_limit_is_missed_and_a_skipped_size_not_measured() -> None:
    cfg = quick_cfg()
    small, large = min(cfg.scale_sizes), max(cfg.scale_sizes)
    slow = cpu(key("fire", large), {HEAP: [2e-6], WHEEL: [5e-6]})
    base = cpu(key("fire", small), {HEAP: [2e-6], WHEEL: [3e-6]})
    (fire, _) = evaluate_targets(targets(cfg), {base.key: base, slow.key: slow})
    assert fire.status == "missed" and fire.value == 5e-6 / 3e-6
    skipped = Comparison(
        slow.key,
        "7",
        "t",
        "cpu_per_timer",
        "s",
        False,
        HEAP,
        {},
        [ContenderResult(WHEEL, skipped="does not fit: needs about 9 GB more")],
        {},
    )
    (fire, _) = evaluate_targets(targets(cfg), {base.key: base, slow.key: skipped})
    assert fire.status == "not measured" and "does not fit" in fire.detail


def test_every_kind_of_target_reports_its_spread() -> None:
    comp = cpu("c", {HEAP: [1.0, 2.0, 4.0], WHEEL: [1.0, 1.0, 1.0]})
    comp.results[1].reps = [{"cpu_per_timer": 1.0, "early": e} for e in (0, 2, 1)]
    ratio, worst = evaluate_targets(
        [Target("r", "c", WHEEL, 1.0), Target("m", "c", WHEEL, 0.0, kind="max", metric="early")],
        {"c": comp},
    )
    assert ratio.detail == "2.00x (spread 1.00-4.00, 3 rounds)"
    assert worst.status == "missed" and worst.detail == "worst early 2 (spread 0-2, 3 rounds)"


def test_memory_has_its_absolute_must_reach_beside_the_asyncio_aim() -> None:
    """Issue 10: at most 350 B per pending timer must be reached; asyncio's handle is the aim."""
    from bench.compare import memory
    from bench.compare.targets import targets_for

    cfg = quick_cfg()
    (bytes_target,) = [t for t in targets_for(cfg) if t.label.startswith("bytes per pending")]
    assert bytes_target.label == f"bytes per pending timer at {cfg.mem_n:,}"

    def measured(engine_bytes: float) -> Comparison:
        results = [
            ContenderResult(memory.ENGINE, reps=[{"bytes_per_timer": engine_bytes}]),
            ContenderResult("asyncio TimerHandle", reps=[{"bytes_per_timer": 217.0}]),
        ]
        ratio = Ratio(217.0 / engine_bytes, 217.0 / engine_bytes, 217.0 / engine_bytes, 1)
        return Comparison(
            "memory", "3", "t", "bytes_per_timer", "B", False, "asyncio TimerHandle", {},
            results, {memory.ENGINE: ratio},
        )  # fmt: skip

    (held,) = evaluate_targets([bytes_target], {"memory": measured(330.0)})
    assert held.status == "met" and held.threshold == "<= 350"
    (missed,) = evaluate_targets([bytes_target], {"memory": measured(351.0)})
    assert missed.status == "missed"
