"""Interleaved repetitions, ratios against an anchor, spread, targets, JSON and the printed table.

A *comparison* runs a few *contenders* (wheel-engine, asyncio, uvloop, a peer library, raw
sqlite3...) on the same workload. Repetitions are interleaved (A, B, C, A, B, C, ... with the
order rotated every round) so that a noisy neighbour slows every contender alike, and each
contender's ratio to the anchor is taken per round, then summarised as the median and the
min..max spread over rounds. Ratios are always "higher is better": for a throughput it is
``contender / anchor``, for a time or a size it is ``anchor / contender``.
"""

from __future__ import annotations

import gc
import math
import statistics
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TextIO

from bench.compare.units import fmt_value

if TYPE_CHECKING:
    from bench.compare.config import Config

__all__ = [
    "RATE",
    "Comparison",
    "Contender",
    "ContenderResult",
    "Figure",
    "Log",
    "Measure",
    "Metrics",
    "Ratio",
    "Skip",
    "short_error",
]

Metrics = dict[str, Any]


class Skip(Exception):
    """Raised by a contender that cannot run here: a peer not installed, no engine yet."""


@dataclass
class Contender:
    """One side of a comparison. ``run`` does one repetition and returns its metrics."""

    name: str
    run: Callable[[], Metrics]
    skip: str | None = None  #: reason known before running (for example: not installed)
    note: str = ""  #: how it was measured, shown under the table


@dataclass
class ContenderResult:
    name: str
    reps: list[Metrics | None] = field(default_factory=list)
    skipped: str | None = None
    error: str | None = None
    note: str = ""

    def values(self, metric: str) -> list[float]:
        return [float(r[metric]) for r in self.reps if r is not None and metric in r]

    def median(self, metric: str) -> float | None:
        vals = self.values(metric)
        return statistics.median(vals) if vals else None

    @property
    def ok(self) -> bool:
        return self.skipped is None and self.error is None and bool(self.values_any())

    def values_any(self) -> list[Metrics]:
        return [r for r in self.reps if r is not None]


@dataclass
class Ratio:
    median: float
    low: float
    high: float
    rounds: int


@dataclass
class Comparison:
    key: str  #: stable id used by targets and plots, e.g. "inmemory.e2e"
    figure: str  #: "1".."6"
    title: str
    metric: str  #: the metric the ratio is taken on
    unit: str
    higher_is_better: bool
    anchor: str
    params: dict[str, Any]
    results: list[ContenderResult]
    ratios: dict[str, Ratio]
    extra_metrics: list[str] = field(default_factory=list)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Comparison:
        """A comparison back from its ``dataclasses.asdict`` form (``results.json``, or a
        figure measured in a subprocess)."""
        fields = dict(d)
        fields["results"] = [ContenderResult(**r) for r in d["results"]]
        fields["ratios"] = {name: Ratio(**r) for name, r in d["ratios"].items()}
        return cls(**fields)

    def result(self, name: str) -> ContenderResult | None:
        for r in self.results:
            if r.name == name:
                return r
        return None


class Log:
    """Progress lines on stderr-like stream; the table goes to stdout at the end."""

    def __init__(self, stream: TextIO, verbose: bool = True) -> None:
        self.stream = stream
        self.verbose = verbose
        self.t0 = time.perf_counter()

    def __call__(self, msg: str) -> None:
        if self.verbose:
            el = time.perf_counter() - self.t0
            print(f"[{el:6.1f}s] {msg}", file=self.stream, flush=True)


def short_error(exc: BaseException) -> str:
    tb = traceback.extract_tb(exc.__traceback__)
    where = ""
    if tb:
        last = tb[-1]
        where = f" at {Path(last.filename).name}:{last.lineno}"
    return f"{type(exc).__name__}: {exc}{where}"


class Measure(NamedTuple):
    """What a comparison's ratio is taken on: a metric, its unit, and which way is better."""

    metric: str
    unit: str
    higher_is_better: bool


#: Timers handled per second.
RATE = Measure("rate", "timers/s", higher_is_better=True)


@dataclass(frozen=True)
class Figure:
    """One figure of the comparison: its number and what it measures.

    Each figure module declares its figure once and builds every comparison with
    :meth:`compare`, so the shared part (figure number, measure, extra columns, the log) is
    written in one place.
    """

    number: str
    measure: Measure
    extra_metrics: tuple[str, ...] = ()

    def compare(
        self,
        cfg: Config,
        *,
        key: str,
        title: str,
        contenders: Sequence[Contender],
        anchor: str,
        reps: int,
        params: dict[str, Any],
        extra_metrics: tuple[str, ...] | None = None,
    ) -> Comparison:
        """Run ``reps`` interleaved rounds of every contender and take ratios to ``anchor``."""
        results = _run_rounds(key, contenders, self.measure, reps, cfg.log)
        return Comparison(
            key=key,
            figure=self.number,
            title=title,
            metric=self.measure.metric,
            unit=self.measure.unit,
            higher_is_better=self.measure.higher_is_better,
            anchor=anchor,
            params=dict(params),
            results=list(results.values()),
            ratios=_ratios(results, anchor, self.measure),
            extra_metrics=list(self.extra_metrics if extra_metrics is None else extra_metrics),
        )


def _run_rounds(
    key: str, contenders: Sequence[Contender], measure: Measure, reps: int, log: Log
) -> dict[str, ContenderResult]:
    """Interleaved rounds, the order rotated every round; a contender that fails or skips is
    dropped from later rounds."""
    results = {c.name: ContenderResult(c.name, skipped=c.skip, note=c.note) for c in contenders}
    for c in contenders:
        if c.skip:
            log(f"{key}: skip {c.name}: {c.skip}")
    live = [c for c in contenders if not c.skip]
    for rnd in range(reps):
        order = live[rnd % len(live) :] + live[: rnd % len(live)] if live else []
        for c in order:
            res = results[c.name]
            if res.skipped or res.error:
                continue
            m = _one_round(key, c, res, log)
            if m is None:
                continue
            while len(res.reps) < rnd:
                res.reps.append(None)
            res.reps.append(m)
            value = fmt_value(m.get(measure.metric), measure.unit)
            log(f"{key}: {c.name} round {rnd + 1}/{reps}: {value}")
    return results


def _one_round(key: str, c: Contender, res: ContenderResult, log: Log) -> Metrics | None:
    """One repetition of ``c``, with the garbage collected before and after; None if it
    skipped or failed (noted in ``res``)."""
    gc.collect()
    try:
        return c.run()
    except Skip as exc:
        res.skipped = str(exc)
        log(f"{key}: skip {c.name}: {exc}")
    except Exception as exc:
        res.error = short_error(exc)
        log(f"{key}: ERROR {c.name}: {res.error}")
    finally:
        gc.collect()
    return None


def _ratios(results: dict[str, ContenderResult], anchor: str, measure: Measure) -> dict[str, Ratio]:
    """Each contender's ratio to the anchor per round (higher is better), summarised."""
    a = results.get(anchor)
    metric = measure.metric
    if a is None or not a.values(metric):
        return {}
    ratios: dict[str, Ratio] = {}
    for name, res in results.items():
        per_round: list[float] = []
        for i, r in enumerate(res.reps):
            ar = a.reps[i] if i < len(a.reps) else None
            if r is None or ar is None or metric not in r or metric not in ar:
                continue
            q = _ratio(float(r[metric]), float(ar[metric]), measure.higher_is_better)
            if not math.isnan(q):
                per_round.append(q)
        if per_round:
            ratios[name] = Ratio(
                statistics.median(per_round), min(per_round), max(per_round), len(per_round)
            )
    return ratios


def _ratio(x: float, anchor: float, higher_is_better: bool) -> float:
    if higher_is_better:
        return x / anchor if anchor > 0 else math.nan
    return anchor / x if x > 0 else (math.inf if anchor > 0 else 1.0)
