"""The targets of the comparison: each a ratio (or a worst value) a contender should reach.

They are printed as met or missed, never asserted: the machine is shared and noisy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bench.compare.measure import Comparison
from bench.compare.units import fmt_ratio

if TYPE_CHECKING:
    from bench.compare.config import Config

__all__ = ["Target", "TargetResult", "evaluate_targets", "targets_for"]


@dataclass
class Target:
    label: str
    comparison: str
    contender: str
    minimum: float
    goal: float | None = None
    #: "ratio": the median ratio to the anchor must reach ``minimum``;
    #: "max": the worst (largest) value of ``metric`` over rounds must be <= ``minimum``.
    kind: str = "ratio"
    metric: str = ""


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
        return f">= {self.minimum:g}x" if self.kind == "ratio" else f"<= {self.minimum:g}"


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
    ]
    return ts


def evaluate_targets(
    targets: Sequence[Target], comparisons: dict[str, Comparison]
) -> list[TargetResult]:
    out: list[TargetResult] = []
    for t in targets:
        comp = comparisons.get(t.comparison)
        res = comp.result(t.contender) if comp else None
        if comp is None or res is None or not res.ok:
            why = "figure not run"
            if res is not None:
                why = res.skipped or res.error or "no data"
            out.append(
                TargetResult(t.label, "not measured", None, t.minimum, t.goal, None, why, t.kind)
            )
            continue
        if t.kind == "ratio":
            r = comp.ratios.get(t.contender)
            if r is None:
                out.append(
                    TargetResult(
                        t.label, "not measured", None, t.minimum, t.goal, None, "no anchor"
                    )
                )
                continue
            met = r.median >= t.minimum
            goal_met = None if t.goal is None else r.median >= t.goal
            detail = (
                f"{fmt_ratio(r.median)}x (spread {fmt_ratio(r.low)}-{fmt_ratio(r.high)}, "
                f"{r.rounds} rounds)"
            )
            out.append(
                TargetResult(
                    t.label,
                    "met" if met else "missed",
                    r.median,
                    t.minimum,
                    t.goal,
                    goal_met,
                    detail,
                )
            )
        else:
            vals = res.values(t.metric)
            worst = max(vals)
            met = worst <= t.minimum
            detail = f"worst {t.metric} over {len(vals)} rounds: {worst:g}"
            out.append(
                TargetResult(
                    t.label,
                    "met" if met else "missed",
                    worst,
                    t.minimum,
                    None,
                    None,
                    detail,
                    t.kind,
                )
            )
    return out
