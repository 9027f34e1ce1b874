"""The targets of the comparison: each a ratio (or a worst value) a contender should reach.

They are printed as met or missed, never asserted: the machine is shared and noisy.
"""

from __future__ import annotations

import importlib
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from bench.compare.measure import Comparison
from bench.compare.units import fmt_ratio

if TYPE_CHECKING:
    from bench.compare.config import Config

__all__ = ["Growth", "Target", "TargetResult", "evaluate_targets", "growth", "targets_for"]


@dataclass
class Target:
    label: str
    comparison: str
    contender: str
    minimum: float
    goal: float | None = None
    #: "ratio": the median ratio to the anchor must reach ``minimum``;
    #: "max": the worst (largest) value of ``metric`` over rounds must be <= ``minimum``;
    #: "growth": the contender's median in ``comparison`` over its median in ``base`` (the
    #: same figure at a smaller size) must be <= ``minimum``; ``peer``'s growth is shown beside.
    kind: str = "ratio"
    metric: str = ""
    base: str = ""
    peer: str = ""


@dataclass
class TargetResult:
    label: str
    status: str  #: "met", "missed" or "not measured"
    value: float | None
    minimum: float
    goal: float | None
    goal_met: bool | None
    detail: str
    kind: str = "ratio"

    @property
    def threshold(self) -> str:
        if self.kind == "ratio":
            return f">= {self.minimum:g}x"
        return f"<= {self.minimum:g}" + ("x" if self.kind == "growth" else "")


def targets_for(cfg: Config) -> list[Target]:
    from bench.compare import durable, inmemory, lateness, memory, recovery

    ts = [
        Target(
            "in memory schedule_many vs asyncio call_at",
            "inmemory.e2e",
            inmemory.ENGINE_MANY,
            1.0,
            2.0,
        ),
        Target(
            "in memory schedule_many, an async def handler, vs asyncio call_at",
            "inmemory.e2e",
            inmemory.ENGINE_ASYNC,
            1.2,
        ),
        Target(
            "in memory schedule one by one vs asyncio call_at",
            "inmemory.e2e",
            inmemory.ENGINE_ONE,
            0.7,
        ),
        Target(
            "durable schedule_many (full) vs raw sqlite3",
            "durable.full",
            durable.many_name("full"),
            0.4,
            0.6,
        ),
        Target(
            "durable schedule_many (normal) vs raw sqlite3",
            "durable.normal",
            durable.many_name("normal"),
            0.4,
            0.6,
        ),
        Target(
            f"{cfg.dur_gather_n:,} concurrent awaited schedule with fsync vs raw batch inserts",
            "durable.full",
            durable.gather_name(cfg, "full"),
            0.15,
            0.3,
        ),
    ]
    for n in cfg.rec_sizes:
        ts.append(
            Target(
                f"recovery with {n:,} timers vs raw read-and-decode",
                f"recovery.{n}",
                recovery.ENGINE,
                0.5,
                0.7,
            )
        )
    ts += [
        Target("lateness p99 no worse than asyncio's", "lateness", lateness.ENGINE, 1.0),
        Target("zero early fires", "lateness", lateness.ENGINE, 0.0, kind="max", metric="early"),
        Target("memory per timer at or below asyncio's", "memory", memory.ENGINE, 1.0),
        # Issue 10's must-reach for memory is absolute (the row above is its aim).
        Target(
            f"bytes per pending timer at {cfg.mem_n:,}",
            "memory",
            memory.ENGINE,
            350.0,
            kind="max",
            metric="bytes_per_timer",
        ),
    ]
    for module in _figure_modules():
        extra = getattr(module, "targets", None)
        if extra is not None:
            ts += extra(cfg)
    return ts


def _figure_modules() -> list[Any]:
    """The registered figure modules (:data:`bench.compare.FIGURES`), imported."""
    from bench.compare import FIGURES

    return [importlib.import_module(f"bench.compare.{m}") for _, m in FIGURES.values()]


def _not_measured(t: Target, why: str) -> TargetResult:
    return TargetResult(t.label, "not measured", None, t.minimum, t.goal, None, why, t.kind)


def evaluate_targets(
    targets: Sequence[Target], comparisons: dict[str, Comparison]
) -> list[TargetResult]:
    """Each target as met, missed or not measured, with its value and its spread over rounds."""
    return [
        _growth(t, comparisons) if t.kind == "growth" else _evaluate(t, comparisons)
        for t in targets
    ]


def _evaluate(t: Target, comparisons: dict[str, Comparison]) -> TargetResult:
    comp = comparisons.get(t.comparison)
    res = comp.result(t.contender) if comp else None
    if comp is None or res is None or not res.ok:
        return _not_measured(
            t, (res.skipped or res.error or "no data") if res else "figure not run"
        )
    if t.kind == "ratio":
        r = comp.ratios.get(t.contender)
        if r is None:
            return _not_measured(t, "no anchor")
        detail = (
            f"{fmt_ratio(r.median)}x (spread {fmt_ratio(r.low)}-{fmt_ratio(r.high)}, "
            f"{r.rounds} rounds)"
        )
        goal_met = None if t.goal is None else r.median >= t.goal
        status = "met" if r.median >= t.minimum else "missed"
        return TargetResult(t.label, status, r.median, t.minimum, t.goal, goal_met, detail)
    vals = res.values(t.metric)
    worst = max(vals)
    detail = f"worst {t.metric} {worst:g} (spread {min(vals):g}-{worst:g}, {len(vals)} rounds)"
    status = "met" if worst <= t.minimum else "missed"
    return TargetResult(t.label, status, worst, t.minimum, None, None, detail, t.kind)


class Growth(NamedTuple):
    """How a contender's median grew from one comparison to another, with the widest spread
    the rounds allow (the smallest over the largest value and the other way round)."""

    median: float
    low: float
    high: float
    rounds: str

    def text(self) -> str:
        return (
            f"{fmt_ratio(self.median)}x (spread {fmt_ratio(self.low)}-{fmt_ratio(self.high)}, "
            f"{self.rounds} rounds)"
        )


def growth(small: Comparison, large: Comparison, name: str) -> Growth | None:
    """``name``'s median in ``large`` over its median in ``small`` (None if either lacks it)."""
    a, b = small.result(name), large.result(name)
    lo = a.values(small.metric) if a else []
    hi = b.values(large.metric) if b else []
    if not lo or not hi or min(lo) <= 0:
        return None
    return Growth(
        statistics.median(hi) / statistics.median(lo),
        min(hi) / max(lo),
        max(hi) / min(lo),
        f"{len(lo)}+{len(hi)}",
    )


def _growth(t: Target, comparisons: dict[str, Comparison]) -> TargetResult:
    small, large = comparisons.get(t.base), comparisons.get(t.comparison)
    if small is None or large is None:
        return _not_measured(t, "figure not run")
    res = large.result(t.contender)
    if res is None or not res.ok:
        return _not_measured(t, (res.skipped or res.error or "no data") if res else "no data")
    g = growth(small, large, t.contender)
    if g is None:
        return _not_measured(t, "no data at the smaller size")
    detail = g.text()
    peer = growth(small, large, t.peer) if t.peer else None
    if peer is not None:
        detail += f"; {t.peer}: {peer.text()}"
    status = "met" if g.median <= t.minimum else "missed"
    return TargetResult(t.label, status, g.median, t.minimum, None, None, detail, t.kind)
