"""The results section of ``docs/benchmarks.md`` (``results.md``) and putting it into the page.

With another run beside this one (``--beside``, :mod:`bench.compare.beside`), the targets
table gets a column with the other run's status and figure (spread included) and every figure's
table a column with the other run's ratio and spread, headed by the other run's build.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from bench.compare.measure import Comparison, ContenderResult
from bench.compare.tables import (
    Results,
    figure_cells,
    params_text,
    series_after,
    series_tables,
    sweep_rows,
)

__all__ = ["BEGIN", "END", "build_of", "format_markdown", "update_docs"]

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


def build_of(machine: dict[str, Any]) -> str:
    """The build a run measured, in words: ``compiled build``, ``pure build`` or ``?``."""
    build = machine.get("build")
    return f"{build} build" if build else "?"


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _md_cells(comp: Comparison, res: ContenderResult) -> list[str]:
    if res.skipped:
        return [res.name, f"skipped: {res.skipped}"] + [""] * (4 + len(comp.extra_metrics))
    vals = res.values(comp.metric)
    if not vals:
        return [res.name, f"error: {res.error}"] + [""] * (4 + len(comp.extra_metrics))
    name = res.name + (" (anchor)" if res.name == comp.anchor else "")
    return [name, *figure_cells(comp, res, ratio="**{}x**")]


def _head(results: Results) -> list[str]:
    machine = results.machine
    out = [
        f"Command: `{results.command}` ({results.elapsed:.0f} s), {machine['date_utc']}, "
        f"commit {machine.get('git_commit') or '?'}, {build_of(machine)}.",
        "",
        f"Machine: {machine['nproc']} CPUs ({machine['cpu']}), Python {machine['python']}, "
        f"SQLite {machine['sqlite']}, {machine['platform']}.",
        "",
        "Versions: " + ", ".join(f"{k} {v}" for k, v in machine["versions"].items()) + ".",
    ]
    if results.beside is not None:
        out += ["", results.beside.describe() + "."]
    return out


def _targets(results: Results) -> list[str]:
    beside = results.beside
    this = build_of(results.machine)
    header = ["target", "status", f"result ({this})"]
    if beside is not None:
        header.append(f"{beside.column}: status, result")
    out = ["", "### Targets", "", _row(header), "|" + "---|" * len(header)]
    for t in results.targets:
        status = t.status
        if t.goal is not None and t.goal_met is not None:
            status += f" (goal {t.goal:g}x {'met' if t.goal_met else 'not yet'})"
        cells = [f"{t.label} ({t.threshold})", status, t.detail]
        if beside is not None:
            cells.append(beside.target(t.label))
        out.append(_row(cells))
    return out


def _comparison(results: Results, comp: Comparison) -> list[str]:
    beside = results.beside
    direction = "higher is better" if comp.higher_is_better else "lower is better"
    out = [
        "",
        f"### Figure {comp.figure}: {comp.title}",
        "",
        f"{comp.metric} in {comp.unit or 'count'} ({direction}); ratio = x {comp.anchor}, "
        f"higher is better; {params_text(comp)}.",
        "",
    ]
    header = ["contender", "median", "min..max", "ratio", "ratio spread", "rounds"]
    header += comp.extra_metrics
    if beside is not None:
        header.append(f"ratio ({beside.column})")
    out += [_row(header), "|" + "---|" * len(header)]
    for res in comp.results:
        cells = _md_cells(comp, res)
        if beside is not None:
            cells.append(beside.ratio(comp.key, res.name))
        out.append(_row(cells))
    notes = [f"{r.name}: {r.note}" for r in comp.results if r.note and not r.skipped]
    if notes:
        out.append("")
        out += [f"- {n}" for n in notes]
    return out


def _sweep(series: dict[str, Any]) -> list[str]:
    got = sweep_rows(series)
    if not got:
        return []
    header, rows = got
    window = series["throughput_vs_n"].get("window_s")
    return [
        "",
        f"Against N (timers/s, median of rounds; window {window} s, so N / window "
        "bounds every contender at small N; 1 round at 1M):",
        "",
        _row(header),
        "|" + "---|" * len(header),
        *(_row(r) for r in rows),
    ]


def _series_table(table: dict[str, Any]) -> list[str]:
    header = table["header"]
    out = ["", f"### Figure {table['figure']}: {table['title']}", "", _row(header)]
    out += ["|" + "---|" * len(header), *(_row(r) for r in table["rows"])]
    if table.get("notes"):
        out += ["", *(f"- {n}" for n in table["notes"])]
    return out


def format_markdown(results: Results) -> str:
    """The results section of ``docs/benchmarks.md``."""
    out = _head(results) + _targets(results)
    comps = results.comparisons
    for i, comp in enumerate(comps):
        if not comp.params.get("sweep"):
            out += _comparison(results, comp)
            if comp.key == "inmemory.e2e" and results.series:
                out += _sweep(results.series)
        figure = series_after(comps, i)
        if figure is not None:
            for table in series_tables(results.series, figure):
                out += _series_table(table)
    return "\n".join(out) + "\n"
