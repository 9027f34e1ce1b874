"""Interleaved repetitions, ratios against an anchor, spread, targets, JSON and the printed table.

A *comparison* runs a few *contenders* (wheel-engine, asyncio, uvloop, a peer library, raw
sqlite3...) on the same workload. Repetitions are interleaved (A, B, C, A, B, C, ... with the
order rotated every round) so that a noisy neighbour slows every contender alike, and each
contender's ratio to the anchor is taken per round, then summarised as the median and the
min..max spread over rounds. Ratios are always "higher is better": for a throughput it is
``contender / anchor``, for a time or a size it is ``anchor / contender``.
"""

from __future__ import annotations

import contextlib
import gc
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

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

    def result(self, name: str) -> ContenderResult | None:
        for r in self.results:
            if r.name == name:
                return r
        return None


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


def _short_error(exc: BaseException) -> str:
    tb = traceback.extract_tb(exc.__traceback__)
    where = ""
    if tb:
        last = tb[-1]
        where = f" at {Path(last.filename).name}:{last.lineno}"
    return f"{type(exc).__name__}: {exc}{where}"


def fmt_value(v: float | None, unit: str = "") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    a = abs(v)
    if unit == "s":
        if a >= 1:
            return f"{v:.2f} s"
        if a >= 1e-3:
            return f"{v * 1e3:.2f} ms"
        return f"{v * 1e6:.0f} us"
    if a >= 100:
        s = f"{v:,.0f}"
    elif a >= 10:
        s = f"{v:.1f}"
    else:
        s = f"{v:.3g}"
    return f"{s} {unit}".strip()


def _bare(unit: str) -> str:
    """The unit for the min..max cell: seconds keep theirs (ms/us scale), others drop it."""
    return "s" if unit == "s" else ""


def fmt_ratio(q: float) -> str:
    if math.isinf(q):
        return "inf"
    if q >= 10:
        return f"{q:.0f}"
    if q >= 0.1:
        return f"{q:.2f}"
    return f"{q:.2g}"


def run_comparison(
    *,
    key: str,
    figure: str,
    title: str,
    contenders: Sequence[Contender],
    anchor: str,
    metric: str,
    unit: str,
    higher_is_better: bool,
    reps: int,
    log: Log,
    params: dict[str, Any] | None = None,
    extra_metrics: Sequence[str] = (),
) -> Comparison:
    """Run ``reps`` interleaved rounds of every contender and compute ratios to ``anchor``."""
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
            gc.collect()
            try:
                m = c.run()
            except Skip as exc:
                res.skipped = str(exc)
                log(f"{key}: skip {c.name}: {exc}")
                continue
            except Exception as exc:
                res.error = _short_error(exc)
                log(f"{key}: ERROR {c.name}: {res.error}")
                continue
            finally:
                gc.collect()
            while len(res.reps) < rnd:
                res.reps.append(None)
            res.reps.append(m)
            log(f"{key}: {c.name} round {rnd + 1}/{reps}: {fmt_value(m.get(metric), unit)}")
    ratios: dict[str, Ratio] = {}
    a = results.get(anchor)
    if a is not None and a.values(metric):
        for name, res in results.items():
            per_round: list[float] = []
            for i, r in enumerate(res.reps):
                ar = a.reps[i] if i < len(a.reps) else None
                if r is None or ar is None or metric not in r or metric not in ar:
                    continue
                x, y = float(r[metric]), float(ar[metric])
                if higher_is_better:
                    q = x / y if y > 0 else math.nan
                else:
                    q = y / x if x > 0 else (math.inf if y > 0 else 1.0)
                per_round.append(q)
            per_round = [q for q in per_round if not math.isnan(q)]
            if per_round:
                ratios[name] = Ratio(
                    statistics.median(per_round), min(per_round), max(per_round), len(per_round)
                )
    return Comparison(
        key=key,
        figure=figure,
        title=title,
        metric=metric,
        unit=unit,
        higher_is_better=higher_is_better,
        anchor=anchor,
        params=dict(params or {}),
        results=list(results.values()),
        ratios=ratios,
        extra_metrics=list(extra_metrics),
    )


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


# ---------------------------------------------------------------------------------------------
# the printed table


def format_comparison(comp: Comparison) -> str:
    direction = "higher is better" if comp.higher_is_better else "lower is better"
    params = ", ".join(
        f"{k}={v:,}" if isinstance(v, int) else f"{k}={v}" for k, v in comp.params.items()
    )
    lines = [
        f"Figure {comp.figure}: {comp.title}",
        f"  {comp.metric} ({comp.unit or 'count'}, {direction}); anchor: {comp.anchor}"
        + (f"; {params}" if params else ""),
    ]
    header = ["contender", "median", "min..max", f"x {comp.anchor}", "ratio spread", "rounds"]
    header += comp.extra_metrics
    rows: list[list[str]] = []
    for res in comp.results:
        if res.skipped:
            rows.append([res.name, f"skipped: {res.skipped}"])
            continue
        if res.error and not res.values(comp.metric):
            rows.append([res.name, f"ERROR: {res.error}"])
            continue
        vals = res.values(comp.metric)
        med = statistics.median(vals) if vals else None
        r = comp.ratios.get(res.name)
        row = [
            res.name,
            fmt_value(med, comp.unit),
            f"{fmt_value(min(vals), _bare(comp.unit))}..{fmt_value(max(vals), _bare(comp.unit))}"
            if vals
            else "-",
            f"{fmt_ratio(r.median)}x" if r else "-",
            f"{fmt_ratio(r.low)}-{fmt_ratio(r.high)}" if r else "-",
            str(len(vals)),
        ]
        for em in comp.extra_metrics:
            unit = (
                "s" if em.endswith("seconds") or em in ("p50", "p99", "p999", "max", "mean") else ""
            )
            row.append(fmt_value(res.median(em), unit))
        if res.error:
            row.append(f"(then ERROR: {res.error})")
        rows.append(row)
    widths = [len(h) for h in header]
    for row in rows:
        if len(row) == len(header) or len(row) == len(header) + 1:
            for i, cell in enumerate(row[: len(header)]):
                widths[i] = max(widths[i], len(cell))

    def fmt_row(row: list[str]) -> str:
        return "  " + "  ".join(
            cell.ljust(widths[i]) if i < len(widths) else cell for i, cell in enumerate(row)
        )

    lines.append(fmt_row(header))
    lines.append("  " + "  ".join("-" * w for w in widths))
    for row in rows:
        lines.append(fmt_row(row).rstrip())
    for res in comp.results:
        if res.note and not res.skipped:
            lines.append(f"  * {res.name}: {res.note}")
    return "\n".join(lines)


def sweep_rows(series: dict[str, Any]) -> tuple[list[str], list[list[str]]] | None:
    """The throughput-against-N series as a header and rows (one row per N)."""
    sw = series.get("throughput_vs_n", {}).get("data", {})
    if not sw:
        return None
    names = list(sw)
    ns = sorted({int(k) for pts in sw.values() for k in pts})
    rows = []
    for n in ns:
        row = [f"{n:,}"]
        for name in names:
            v = sw[name].get(str(n))
            row.append(fmt_value(v) if v is not None else "-")
        rows.append(row)
    return ["N", *names], rows


def format_sweep(series: dict[str, Any]) -> str:
    got = sweep_rows(series)
    if got is None:
        return ""
    header, rows = got
    window = series["throughput_vs_n"].get("window_s")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = [
        f"Figure 1 (sweep): in memory end to end, timers/s (median of rounds) against N, "
        f"window {window} s; N / window bounds every contender at small N",
        "  " + "  ".join(h.ljust(widths[i]) for i, h in enumerate(header)),
        "  " + "  ".join("-" * w for w in widths),
    ]
    for row in rows:
        lines.append("  " + "  ".join(c.ljust(widths[i]) for i, c in enumerate(row)).rstrip())
    return "\n".join(lines)


def format_targets(results: Sequence[TargetResult]) -> str:
    lines = ["Targets (printed, not asserted)"]
    for r in results:
        goal = ""
        if r.goal is not None and r.goal_met is not None:
            goal = f"; goal {r.goal:g}x {'met' if r.goal_met else 'not yet'}"
        lines.append(f"  [{r.status.upper():>12}] {r.label} ({r.threshold}{goal}): {r.detail}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# machine and JSON


def machine_info() -> dict[str, Any]:
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        cpu = platform.processor() or "unknown"
    versions: dict[str, str] = {}
    from importlib import metadata

    for dist in (
        "wheel-engine",
        "uvloop",
        "apscheduler",
        "sqlalchemy",
        "huey",
        "msgpack",
        "aiosqlite",
        "matplotlib",
    ):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = "not installed"
    commit = os.environ.get("WHEEL_ENGINE_BENCH_COMMIT", "")
    if not commit:
        # "<hash>-dirty" when tracked files differ from the commit (someone is editing)
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            commit = subprocess.run(
                ["git", "describe", "--always", "--dirty", "--abbrev=7"],
                cwd=Path(__file__).resolve().parents[2],
                capture_output=True,
                text=True,
                timeout=5,
                check=False,
            ).stdout.strip()
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "sqlite": __import__("sqlite3").sqlite_version,
        "versions": versions,
        "git_commit": commit,
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def _clean(obj: Any) -> Any:
    if isinstance(obj, float) and (math.isnan(obj) or math.isinf(obj)):
        return None
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    return obj


def write_json(
    path: Path,
    *,
    machine: dict[str, Any],
    command: str,
    comparisons: Sequence[Comparison],
    targets: Sequence[TargetResult],
    series: dict[str, Any],
    elapsed: float,
) -> None:
    doc = {
        "machine": machine,
        "command": command,
        "elapsed_seconds": elapsed,
        "comparisons": [asdict(c) for c in comparisons],
        "targets": [asdict(t) for t in targets],
        "series": series,
    }
    path.write_text(json.dumps(_clean(doc), indent=1) + "\n", encoding="utf-8")


# ---------------------------------------------------------------------------------------------
# markdown (docs/benchmarks.md is made from this)


def _md_cells(comp: Comparison, res: ContenderResult) -> list[str]:
    if res.skipped:
        return [res.name, f"skipped: {res.skipped}"] + [""] * (4 + len(comp.extra_metrics))
    vals = res.values(comp.metric)
    if not vals:
        return [res.name, f"error: {res.error}"] + [""] * (4 + len(comp.extra_metrics))
    r = comp.ratios.get(res.name)
    bare = _bare(comp.unit)
    cells = [
        res.name + (" (anchor)" if res.name == comp.anchor else ""),
        fmt_value(statistics.median(vals), comp.unit),
        f"{fmt_value(min(vals), bare)}..{fmt_value(max(vals), bare)}",
        f"**{fmt_ratio(r.median)}x**" if r else "-",
        f"{fmt_ratio(r.low)}-{fmt_ratio(r.high)}" if r else "-",
        str(len(vals)),
    ]
    for em in comp.extra_metrics:
        unit = "s" if em.endswith("seconds") or em in ("p50", "p99", "p999", "max", "mean") else ""
        cells.append(fmt_value(res.median(em), unit))
    return cells


def format_markdown(
    comparisons: Sequence[Comparison],
    targets: Sequence[TargetResult],
    machine: dict[str, Any],
    command: str,
    elapsed: float,
    series: dict[str, Any] | None = None,
) -> str:
    out = [
        f"Command: `{command}` ({elapsed:.0f} s), {machine['date_utc']}, "
        f"commit {machine.get('git_commit') or '?'}.",
        "",
        f"Machine: {machine['nproc']} CPUs ({machine['cpu']}), Python {machine['python']}, "
        f"SQLite {machine['sqlite']}, {machine['platform']}.",
        "",
        "Versions: " + ", ".join(f"{k} {v}" for k, v in machine["versions"].items()) + ".",
        "",
        "### Targets",
        "",
        "| target | status | result |",
        "|---|---|---|",
    ]
    for t in targets:
        status = t.status
        if t.goal is not None and t.goal_met is not None:
            status += f" (goal {t.goal:g}x {'met' if t.goal_met else 'not yet'})"
        out.append(f"| {t.label} ({t.threshold}) | {status} | {t.detail} |")
    for comp in comparisons:
        if comp.params.get("sweep"):
            continue
        direction = "higher is better" if comp.higher_is_better else "lower is better"
        params = ", ".join(
            f"{k}={v:,}" if isinstance(v, int) else f"{k}={v}" for k, v in comp.params.items()
        )
        out += [
            "",
            f"### Figure {comp.figure}: {comp.title}",
            "",
            f"{comp.metric} in {comp.unit or 'count'} ({direction}); ratio = x {comp.anchor}, "
            f"higher is better; {params}.",
            "",
        ]
        header = ["contender", "median", "min..max", "ratio", "ratio spread", "rounds"]
        header += comp.extra_metrics
        out.append("| " + " | ".join(header) + " |")
        out.append("|" + "---|" * len(header))
        for res in comp.results:
            out.append("| " + " | ".join(_md_cells(comp, res)) + " |")
        notes = [f"{r.name}: {r.note}" for r in comp.results if r.note and not r.skipped]
        if notes:
            out.append("")
            out += [f"- {n}" for n in notes]
        if comp.key == "inmemory.e2e" and series:
            got = sweep_rows(series)
            if got:
                header, rows = got
                window = series["throughput_vs_n"].get("window_s")
                out += [
                    "",
                    f"Against N (timers/s, median of rounds; window {window} s, so N / window "
                    "bounds every contender at small N; 1 round at 1M):",
                    "",
                    "| " + " | ".join(header) + " |",
                    "|" + "---|" * len(header),
                ]
                out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out) + "\n"
