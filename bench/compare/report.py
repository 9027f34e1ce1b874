"""Reporting: the printed tables, ``results.json``, the plots and the docs page.

The markdown of ``docs/benchmarks.md`` is :mod:`bench.compare.markdown`; the cells both share
are :mod:`bench.compare.tables`.
"""

from __future__ import annotations

import json
import math
import sys
import traceback
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.compare.markdown import build_of, format_markdown, update_docs
from bench.compare.measure import Comparison
from bench.compare.tables import (
    Results,
    figure_cells,
    params_text,
    series_after,
    series_tables,
    sweep_rows,
)
from bench.compare.targets import TargetResult

if TYPE_CHECKING:
    from bench.compare.beside import Beside

__all__ = [
    "Results",
    "format_comparison",
    "format_markdown",
    "format_series_table",
    "format_sweep",
    "format_targets",
    "print_summary",
    "update_docs",
    "write_json",
    "write_outputs",
]


# ---------------------------------------------------------------------------------------------
# the printed table


def format_comparison(comp: Comparison) -> str:
    direction = "higher is better" if comp.higher_is_better else "lower is better"
    params = params_text(comp)
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
        row = [res.name, *figure_cells(comp, res, ratio="{}x")]
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


def _text_table(title: str, header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = [
        title,
        "  " + "  ".join(h.ljust(widths[i]) for i, h in enumerate(header)),
        "  " + "  ".join("-" * w for w in widths),
    ]
    for row in rows:
        lines.append("  " + "  ".join(c.ljust(widths[i]) for i, c in enumerate(row)).rstrip())
    return "\n".join(lines)


def format_sweep(series: dict[str, Any]) -> str:
    got = sweep_rows(series)
    if got is None:
        return ""
    header, rows = got
    window = series["throughput_vs_n"].get("window_s")
    title = (
        f"Figure 1 (sweep): in memory end to end, timers/s (median of rounds) against N, "
        f"window {window} s; N / window bounds every contender at small N"
    )
    return _text_table(title, header, rows)


def format_series_table(table: dict[str, Any]) -> str:
    """A figure's ready table (:func:`bench.compare.tables.series_tables`), as text."""
    text = _text_table(
        f"Figure {table['figure']}: {table['title']}", table["header"], table["rows"]
    )
    return "\n".join([text, *(f"  * {n}" for n in table.get("notes", []))])


def format_targets(results: Sequence[TargetResult], beside: Beside | None = None) -> str:
    lines = ["Targets (printed, not asserted)"]
    for r in results:
        goal = ""
        if r.goal is not None and r.goal_met is not None:
            goal = f"; goal {r.goal:g}x {'met' if r.goal_met else 'not yet'}"
        lines.append(f"  [{r.status.upper():>12}] {r.label} ({r.threshold}{goal}): {r.detail}")
        if beside is not None:
            lines.append(f"  {'':>14} {beside.column}: {beside.target(r.label)}")
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
    if results.beside is not None:
        doc["beside"] = {"file": results.beside.source, "build": results.beside.build}
    path.write_text(json.dumps(_clean(doc), indent=1) + "\n", encoding="utf-8")


def print_summary(results: Results) -> None:
    """The run's tables and targets on stdout."""
    machine, comps = results.machine, results.comparisons
    print()
    print(
        f"wheel-engine bench ({'quick' if results.quick else 'full'}, {build_of(machine)}): "
        f"{machine['nproc']} CPUs, {machine['cpu']}, Python {machine['python']}, "
        f"SQLite {machine['sqlite']}, {results.elapsed:.0f} s"
    )
    print("Ratios are per interleaved round against the anchor (higher is better), median and")
    print("min-max spread over rounds; this machine is shared, expect +-30% on absolute figures.")
    if results.beside is not None:
        print(results.beside.describe())
    for i, comp in enumerate(comps):
        if not comp.params.get("sweep"):
            print()
            print(format_comparison(comp))
            if comp.key == "inmemory.e2e" and format_sweep(results.series):
                print()
                print(format_sweep(results.series))
        figure = series_after(comps, i)
        for table in series_tables(results.series, figure) if figure else []:
            print()
            print(format_series_table(table))
    print()
    print(format_targets(results.targets, results.beside))


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
    subtitle = (
        f"{machine['nproc']} CPUs, {machine['cpu']}, Python {machine['python']}, "
        f"{build_of(machine)}"
    )
    try:
        return plots.draw(results.comparisons, results.series, out, subtitle), False
    except Exception:
        print("plots failed:", file=sys.stderr)
        traceback.print_exc()
        return [], True
