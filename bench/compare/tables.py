"""What the printed report and the markdown share: the results of a run and their table cells.

A figure measured as a series of sizes (figure 1's sweep, figure 7's pending N) marks those
comparisons ``params["sweep"]``; they get no table of their own. Figure 1's sweep is shown under
its main comparison (:func:`sweep_rows`); any other figure may put a ready table into its entry
of the run's series (``series[name]["table"]``: ``figure``, ``title``, ``header``, ``rows``,
``notes``), which both reports print after the figure's last comparison (:func:`series_tables`).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from bench.compare.measure import Comparison, ContenderResult
from bench.compare.targets import TargetResult
from bench.compare.units import bare_unit, fmt_ratio, fmt_value

if TYPE_CHECKING:
    from bench.compare.beside import Beside

__all__ = [
    "Results",
    "figure_cells",
    "params_text",
    "series_after",
    "series_tables",
    "sweep_rows",
]


class Results(NamedTuple):
    """Everything one run produced, as reported and written."""

    comparisons: Sequence[Comparison]
    targets: Sequence[TargetResult]
    machine: dict[str, Any]
    command: str
    elapsed: float  #: seconds the figures took
    series: dict[str, Any]  #: the plotted data (e.g. throughput against N)
    quick: bool
    beside: Beside | None = None  #: another build's run, reported beside this one (--beside)


#: Extra columns that are times (shown in s/ms/us); the others are plain numbers.
_TIME_COLUMNS = ("p50", "p99", "p999", "max", "mean")


def _extra_unit(column: str) -> str:
    return "s" if column.endswith("seconds") or column in _TIME_COLUMNS else ""


def figure_cells(comp: Comparison, res: ContenderResult, *, ratio: str) -> list[str]:
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


def params_text(comp: Comparison) -> str:
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


def series_tables(series: dict[str, Any], figure: str) -> list[dict[str, Any]]:
    """The ready tables of ``figure`` in the run's series (see the module docstring)."""
    return [
        entry["table"]
        for entry in series.values()
        if isinstance(entry, dict) and entry.get("table", {}).get("figure") == figure
    ]


def series_after(comparisons: Sequence[Comparison], index: int) -> str | None:
    """The figure whose series tables go after comparison ``index``: its figure's last one."""
    figure = comparisons[index].figure
    later = any(c.figure == figure for c in comparisons[index + 1 :])
    return None if later else figure
