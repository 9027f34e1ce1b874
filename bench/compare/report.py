"""Reporting: the printed tables, ``results.json``, the markdown of ``docs/benchmarks.md``."""

from __future__ import annotations

import json
import math
import shutil
import statistics
import sys
import traceback
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any, NamedTuple

from bench.compare.measure import Comparison, ContenderResult
from bench.compare.targets import TargetResult
from bench.compare.units import bare_unit, fmt_ratio, fmt_value

__all__ = [
    "Results",
    "format_comparison",
    "format_markdown",
    "format_sweep",
    "format_targets",
    "print_summary",
    "update_docs",
    "write_json",
    "write_outputs",
]

BEGIN = "<!-- results:begin (written by wheel-engine bench --docs docs) -->"
END = "<!-- results:end -->"


def update_docs(docs: Path, results_md: Path, files: list[Path]) -> list[Path]:
    """Replace the results block of ``docs/benchmarks.md`` and copy the PNGs to ``docs/img``."""
    page = docs / "benchmarks.md"
    text = page.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        raise ValueError(f"{page} has no results markers ({BEGIN} ... {END})")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    block = results_md.read_text(encoding="utf-8")
    page.write_text(f"{head}{BEGIN}\n\n{block}\n{END}{tail}", encoding="utf-8")
    img = docs / "img"
    img.mkdir(exist_ok=True)
    copied = [page]
    for f in files:
        if f.suffix == ".png":
            shutil.copyfile(f, img / f.name)
            copied.append(img / f.name)
    return copied


# ---------------------------------------------------------------------------------------------
# the printed table


def format_comparison(comp: Comparison) -> str:
    direction = "higher is better" if comp.higher_is_better else "lower is better"
    params = _params(comp)
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
        row = [res.name, *_figures(comp, res, ratio="{}x")]
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


class Results(NamedTuple):
    """Everything one run produced, as reported and written."""

    comparisons: Sequence[Comparison]
    targets: Sequence[TargetResult]
    machine: dict[str, Any]
    command: str
    elapsed: float  #: seconds the figures took
    series: dict[str, Any]  #: the plotted data (e.g. throughput against N)
    quick: bool


#: Extra columns that are times (shown in s/ms/us); the others are plain numbers.
_TIME_COLUMNS = ("p50", "p99", "p999", "max", "mean")


def _extra_unit(column: str) -> str:
    return "s" if column.endswith("seconds") or column in _TIME_COLUMNS else ""


def _figures(comp: Comparison, res: ContenderResult, *, ratio: str) -> list[str]:
    """A measured contender's cells after its name: median, min..max, ratio (written with the
    ``ratio`` template), ratio spread, rounds, then the extra columns."""
    vals = res.values(comp.metric)
    r = comp.ratios.get(res.name)
    cells = [
        fmt_value(statistics.median(vals) if vals else None, comp.unit),
        _spread(vals, comp.unit),
        ratio.format(fmt_ratio(r.median)) if r else "-",
        f"{fmt_ratio(r.low)}-{fmt_ratio(r.high)}" if r else "-",
        str(len(vals)),
    ]
    cells += [fmt_value(res.median(em), _extra_unit(em)) for em in comp.extra_metrics]
    return cells


def _params(comp: Comparison) -> str:
    return ", ".join(
        f"{k}={v:,}" if isinstance(v, int) else f"{k}={v}" for k, v in comp.params.items()
    )


def _spread(vals: list[float], unit: str) -> str:
    """``min..max`` of a contender's values; seconds keep their unit (ms/us scale)."""
    if not vals:
        return "-"
    bare = bare_unit(unit)
    return f"{fmt_value(min(vals), bare)}..{fmt_value(max(vals), bare)}"


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


def _clean(obj: Any) -> Any:
    if isinstance(obj, float) and (math.isnan(obj) or math.isinf(obj)):
        return None
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    return obj


def write_json(path: Path, results: Results) -> None:
    """Every round of every contender, the machine, the targets and the series."""
    doc = {
        "machine": results.machine,
        "command": results.command,
        "elapsed_seconds": results.elapsed,
        "comparisons": [asdict(c) for c in results.comparisons],
        "targets": [asdict(t) for t in results.targets],
        "series": results.series,
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
    name = res.name + (" (anchor)" if res.name == comp.anchor else "")
    return [name, *_figures(comp, res, ratio="**{}x**")]


def format_markdown(results: Results) -> str:
    """The results section of ``docs/benchmarks.md``."""
    comparisons, targets, machine, command, elapsed, series, _ = results
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
        params = _params(comp)
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


def print_summary(results: Results) -> None:
    """The run's tables and targets on stdout."""
    comparisons, targets, machine, _, elapsed, series, quick = results
    print()
    print(
        f"wheel-engine bench ({'quick' if quick else 'full'}): {machine['nproc']} CPUs, "
        f"{machine['cpu']}, Python {machine['python']}, SQLite {machine['sqlite']}, "
        f"{elapsed:.0f} s"
    )
    print("Ratios are per interleaved round against the anchor (higher is better), median and")
    print("min-max spread over rounds; this machine is shared, expect +-30% on absolute figures.")
    for comp in comparisons:
        if comp.params.get("sweep"):
            continue
        print()
        print(format_comparison(comp))
        if comp.key == "inmemory.e2e" and format_sweep(series):
            print()
            print(format_sweep(series))
    print()
    print(format_targets(targets))


def write_outputs(
    out: Path, results: Results, *, plots: bool, docs: Path | None
) -> tuple[list[Path], bool]:
    """``results.json``, ``results.md``, the plots and (``docs``) the docs page; returns the
    files written and whether something failed (said on stderr)."""
    write_json(out / "results.json", results)
    (out / "results.md").write_text(format_markdown(results), encoding="utf-8")
    written = [out / "results.json", out / "results.md"]
    failed = False
    if plots:
        drawn, failed = _draw_plots(results, out)
        written += drawn
    if docs is not None:
        try:
            written += update_docs(docs, out / "results.md", written)
        except (OSError, ValueError) as exc:
            failed = True
            print(f"--docs: {exc}", file=sys.stderr)
    return written, failed


def _draw_plots(results: Results, out: Path) -> tuple[list[Path], bool]:
    """A PNG per figure (:mod:`bench.compare.plots`); a plot that fails is said on stderr."""
    from bench.compare import plots

    why = plots.matplotlib_missing()
    if why:
        print(f"plots: skipped: {why}")
        return [], False
    machine = results.machine
    subtitle = f"{machine['nproc']} CPUs, {machine['cpu']}, Python {machine['python']}"
    try:
        return plots.draw(results.comparisons, results.series, out, subtitle), False
    except Exception:
        print("plots failed:", file=sys.stderr)
        traceback.print_exc()
        return [], True
