"""PNG plots, one per figure of the comparison (matplotlib's Agg canvas, never pyplot).

Files: ``throughput.png`` (1: in memory against N), ``cancel.png`` (1: the cancel mix),
``lateness.png`` (2: the CDF), ``memory.png`` (3), ``durable.png`` (4: full and normal),
``firing.png`` (5), ``recovery.png`` (6: one panel per size).

Guaranteed: every plot's title says what it compares and that its ratios come from one run on
one machine; a legend names only lines drawn inside the axes; the layout is constrained and long
titles are wrapped, so no label is cut off (``tests/bench/test_bench_plots.py`` checks both);
an axis whose values span a decade or more is logarithmic. Not guaranteed: that two contenders
with equal figures stay apart (they are told apart by line style and marker, not by position).
"""

from __future__ import annotations

import math
import statistics
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.compare.units import fmt_ratio

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from bench.compare.measure import Comparison

__all__ = ["draw", "figures", "matplotlib_missing"]

WIDTH_IN = 8.0  #: every plot's width in inches (the docs page shows them at this size)
DPI = 100  #: pixels per inch of the PNGs
TITLE_CHARS = 115  #: a title line is wrapped beyond this many characters (fits WIDTH_IN at 9.5 pt)
NAME_CHARS = 30  #: a contender's name beside its bar is wrapped beyond this many characters
ENG_FROM = 1e4  #: an axis reaching this high gets k/M tick labels
DECADE = 10.0  #: values spanning at least this factor get a log axis
ONE_RUN = "one run on one machine"  #: what every title says the ratios come from

#: line colour, style and marker per contender of the line plots; others get the defaults
STYLE: dict[str, tuple[str | None, str, str | None]] = {
    "wheel-engine schedule_many()": ("C0", "-", "o"),
    "wheel-engine schedule()": ("C0", "--", "s"),
    "wheel-engine": ("C0", "-", None),
    "wheel-engine on uvloop": ("C4", "-.", None),
    "asyncio call_at": ("C1", "-", "^"),
    "uvloop call_at": ("C2", "-", "v"),
}

#: what a comparison's metric is, in words, for the axis label
METRIC_WORDS = {
    "rate": "timers handled per second",
    "seconds": "time",
    "bytes_per_timer": "memory per pending timer",
    "p99": "p99 of fired minus due",
}

#: bar colour by the start of a contender's name (first match wins); the anchor is hatched
BAR_COLOURS = (
    ("wheel-engine", "C0"),
    ("asyncio", "C1"),
    ("uvloop", "C2"),
    ("APScheduler", "C3"),
    ("huey", "C5"),
    ("raw sqlite3", "C7"),
)

#: the headline of each bar plot (the line plots fall back to bars without their series)
HEADLINES = {
    "throughput": "Figure 1: in memory, end to end, wheel-engine against asyncio and uvloop",
    "lateness": "Figure 2: lateness, wheel-engine against asyncio and uvloop call_at",
    "cancel": "Figure 1: in memory, cancel-heavy mix, wheel-engine against asyncio and uvloop",
    "memory": "Figure 3: memory per pending timer, wheel-engine against asyncio and uvloop",
    "durable": "Figure 4: durable scheduling, wheel-engine against raw sqlite3, APScheduler, huey",
    "firing": "Figure 5: firing due durable timers, wheel-engine against APScheduler and huey",
    "recovery": "Figure 6: recovery (start-up), wheel-engine against a raw read of the rows",
}


def matplotlib_missing() -> str | None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return "matplotlib not installed (pip install 'wheel-engine[bench]')"
    return None


def draw(
    comparisons: Sequence[Comparison], series: dict[str, Any], out: Path, machine: str
) -> list[Path]:
    """Write every plot the results allow into ``out``; returns the files written."""
    made = []
    for stem, fig in figures(comparisons, series, machine).items():
        path = out / f"{stem}.png"
        fig.savefig(path, dpi=DPI)
        made.append(path)
    return made


def figures(
    comparisons: Sequence[Comparison], series: dict[str, Any], machine: str
) -> dict[str, Figure]:
    """Each plot by file stem, not yet written. A comparison whose own plot has no data (the
    sweep, the CDF) is drawn as bars instead, so every measured figure gets a plot."""
    by_key = {c.key: c for c in comparisons}
    made: dict[str, Figure] = {}
    line_plots: list[tuple[str, str, Callable[..., Figure | None]]] = [
        ("throughput", "inmemory.e2e", throughput),
        ("lateness", "lateness", lateness),
    ]
    drawn = set()
    for stem, key, plot in line_plots:
        fig = plot(series, by_key.get(key), machine)
        if fig is not None:
            made[stem] = fig
            drawn.add(key)
    groups: dict[str, list[Comparison]] = {}
    for comp in comparisons:
        if comp.key not in drawn and not comp.params.get("sweep"):
            groups.setdefault(_stem(comp.key), []).append(comp)
    for stem, comps in groups.items():
        made[stem] = bars(comps, stem, machine)
    return made


def _stem(key: str) -> str:
    """The file a comparison's bars go to: ``durable.full`` and ``durable.normal`` share one."""
    return {"inmemory.cancel": "cancel", "inmemory.e2e": "throughput"}.get(key, key.split(".")[0])


# ---------------------------------------------------------------------------------------------
# the two line plots


def throughput(series: dict[str, Any], comp: Comparison | None, machine: str) -> Figure | None:
    """Figure 1: timers/s against N per contender, with the N / window bound."""
    sweep = series.get("throughput_vs_n", {})
    data: dict[str, dict[str, float]] = sweep.get("data", {})
    if not any(data.values()):
        return None
    fig, ax = _figure(4.6)
    ax.set_xscale("log")
    ratios = _ratio_notes(comp)
    for name, points in data.items():
        xs = sorted(int(k) for k in points)
        color, ls, marker = STYLE.get(name, (None, "-", "o"))
        label = name + (f" ({ratios[name]})" if name in ratios else "")
        ax.plot(xs, [points[str(x)] for x in xs], label=label, color=color, ls=ls, marker=marker)
    values = [v for points in data.values() for v in points.values()]
    _scale(ax, "y", values)
    ns = sorted({int(k) for points in data.values() for k in points})
    window = sweep.get("window_s")
    if window:
        # drawn on top: at small N it coincides with every contender, which is the point;
        # the limits stay the contenders', so the bound leaves the plot where it stops binding
        ax.autoscale(False)
        bound = [n / window for n in ns]
        ax.plot(ns, bound, color="black", ls=":", lw=2.0, zorder=5, label="N / window (bound)")
    ax.set_xticks(ns, [f"{n:,}" for n in ns], minor=False)
    ax.xaxis.set_minor_formatter("")
    ax.set_xlabel("timers scheduled, then fired (N)")
    ax.set_ylabel("timers/s, first schedule to last firing")
    _engineering(ax, "y")
    ax.grid(True, which="both", alpha=0.3)
    n = f", ratios at N={comp.params['n']:,}" if comp is not None else ""
    _titles(
        fig,
        "Figure 1: in memory, end to end, timers/s by N: wheel-engine against asyncio and "
        f"uvloop call_at (window {window} s)",
        f"{ONE_RUN} ({machine}){n}, x {comp.anchor if comp else 'the anchor'}, "
        "median of rounds; higher is better",
    )
    _legend(ax)
    return fig


def lateness(series: dict[str, Any], comp: Comparison | None, machine: str) -> Figure | None:
    """Figure 2: the CDF of fired minus due of each contender's median-p99 round."""
    cdfs: dict[str, list[list[float]]] = series.get("lateness_cdf", {}).get("data", {})
    if not any(cdfs.values()):
        return None
    fig, ax = _figure(4.6)
    ratios = _ratio_notes(comp, "p99 ")
    for name, cdf in cdfs.items():
        color, ls, _ = STYLE.get(name, (None, "-", None))
        label = name + (f" ({ratios[name]})" if name in ratios else "")
        ax.plot([v * 1e3 for _, v in cdf], [q for q, _ in cdf], label=label, color=color, ls=ls)
    ax.set_xscale("symlog", linthresh=1.0)
    ax.axvline(0.0, color="red", lw=0.8, label="due (left of it: early, which must not happen)")
    ax.set_xlabel("fired minus due (ms, wall clock; linear within ±1 ms, logarithmic beyond)")
    ax.set_ylabel("fraction of timers fired")
    ax.set_ylim(0.0, 1.02)
    ax.grid(True, which="both", alpha=0.3)
    lat = series["lateness_cdf"]
    _titles(
        fig,
        f"Figure 2: lateness of {lat.get('n', 0):,} timers due over {lat.get('window_s', '?')} s "
        "(CDF): wheel-engine against asyncio and uvloop call_at",
        f"{ONE_RUN} ({machine}), each contender's median-p99 round; "
        f"p99 ratio x {comp.anchor if comp else 'the anchor'}, higher is better",
    )
    _legend(ax)
    return fig


def _ratio_notes(comp: Comparison | None, what: str = "") -> dict[str, str]:
    """``"0.57x"`` (after ``what``) per contender of ``comp``; the anchor's is ``"anchor"``."""
    if comp is None:
        return {}
    notes = {name: f"{what}{fmt_ratio(r.median)}x" for name, r in comp.ratios.items()}
    if comp.anchor in notes:
        notes[comp.anchor] = "anchor"
    return notes


# ---------------------------------------------------------------------------------------------
# bars: every other figure, one panel per comparison


def bars(comps: Sequence[Comparison], stem: str, machine: str) -> Figure:
    """Each contender's median as a bar, its min..max over rounds as a whisker, and its ratio to
    the anchor as the right-hand tick label; one panel per comparison."""
    heights = [0.9 + 0.38 * len(c.results) for c in comps]
    fig = _new_figure(1.1 + sum(heights))
    axes = fig.subplots(len(comps), 1, squeeze=False, height_ratios=heights)[:, 0]
    for ax, comp in zip(axes, comps, strict=True):
        _bar_panel(ax, comp)
    anchors = sorted({c.anchor for c in comps})
    _titles(
        fig,
        HEADLINES.get(stem, f"Figure {comps[0].figure}: {comps[0].title}, against {anchors[0]}"),
        f"{ONE_RUN} ({machine}); ratio x {' / '.join(anchors)} (the hatched bar), "
        "median over rounds, higher is better",
    )
    return fig


def _bar_panel(ax: Axes, comp: Comparison) -> None:
    scale, unit = _unit_scale(comp)
    ys = list(range(len(comp.results)))[::-1]
    measured: list[float] = []
    for y, res in zip(ys, comp.results, strict=True):
        vals = [v * scale for v in res.values(comp.metric)]
        if vals:
            _bar(ax, y, vals, _bar_colour(res.name), anchor=res.name == comp.anchor)
            measured += vals
    if measured:
        _scale(ax, "x", measured)
    ax.set_yticks(ys, [_name_cell(comp, res.name) for res in comp.results], fontsize=8.5)
    right = ax.twinx()
    right.set_ylim(ax.get_ylim())
    right.set_yticks(ys, [_ratio_cell(comp, res.name) for res in comp.results], fontsize=8.5)
    right.set_ylabel("ratio x anchor", fontsize=8)
    better = "higher" if comp.higher_is_better else "lower"
    what = METRIC_WORDS.get(comp.metric, comp.metric)
    ax.set_xlabel(f"{what} ({unit}), {better} is better; bar: median, whisker: min..max of rounds")
    _engineering(ax, "x")
    ax.set_title(_wrap(comp.title), fontsize=9)
    ax.grid(True, axis="x", which="both", alpha=0.3)


def _bar(ax: Axes, y: float, vals: list[float], colour: str, *, anchor: bool) -> None:
    """The median as a bar (hatched for the anchor), min..max as a whisker."""
    med = statistics.median(vals)
    ax.barh(
        y,
        med,
        height=0.6,
        color=colour,
        hatch="//" if anchor else None,
        edgecolor="black" if anchor else "none",
    )
    spread = [[med - min(vals)], [max(vals) - med]]
    ax.errorbar(med, y, xerr=spread, fmt="none", ecolor="black", capsize=3, lw=1)


def _bar_colour(name: str) -> str:
    return next((c for prefix, c in BAR_COLOURS if name.startswith(prefix)), "C8")


def _name_cell(comp: Comparison, name: str) -> str:
    res = comp.result(name)
    if res is not None and not res.values(comp.metric):
        why = res.skipped or res.error or "no value"
        name = f"{name}: not measured ({textwrap.shorten(why, 40, placeholder='...')})"
    return _wrap_to(name, NAME_CHARS)


def _ratio_cell(comp: Comparison, name: str) -> str:
    r = comp.ratios.get(name)
    if name == comp.anchor:
        return "1x (anchor)"
    if r is None:
        return "-"
    spread = f" ({fmt_ratio(r.low)}-{fmt_ratio(r.high)})" if r.rounds > 1 else ""
    return f"{fmt_ratio(r.median)}x{spread}"


def _unit_scale(comp: Comparison) -> tuple[float, str]:
    """Seconds shown in ms below one second (recovery at 100k reads 497 ms, not 0.497 s)."""
    if comp.unit != "s":
        return 1.0, {"B/timer": "bytes"}.get(comp.unit, comp.unit or "count")
    vals = [v for res in comp.results for v in res.values(comp.metric)]
    if vals and max(vals) < 1.0:
        return 1e3, "ms"
    return 1.0, "s"


# ---------------------------------------------------------------------------------------------
# shared: figures, titles, axes, legends


def _new_figure(height_in: float) -> Figure:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(WIDTH_IN, height_in), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _figure(height_in: float) -> tuple[Figure, Axes]:
    fig = _new_figure(height_in)
    return fig, fig.subplots()


def _wrap(text: str) -> str:
    return _wrap_to(text, TITLE_CHARS)


def _wrap_to(text: str, chars: int) -> str:
    return "\n".join(textwrap.wrap(text, chars))


def _titles(fig: Figure, headline: str, provenance: str) -> None:
    """The title: what the plot compares, then where its ratios come from (one run, one
    machine). A suptitle, so the constrained layout makes room for all its lines."""
    fig.suptitle(f"{_wrap(headline)}\n{_wrap(provenance)}", fontsize=9.5)


def _scale(ax: Axes, axis: str, values: Sequence[float]) -> None:
    """Log when the positive values span a decade or more, else linear from zero."""
    positive = [v for v in values if v > 0 and math.isfinite(v)]
    log = bool(positive) and max(positive) / min(positive) >= DECADE
    if log:
        ax.set_xscale("log") if axis == "x" else ax.set_yscale("log")
    elif axis == "x":
        ax.set_xlim(left=0)
    else:
        ax.set_ylim(bottom=0)


def _engineering(ax: Axes, axis: str) -> None:
    """Ticks as 300k or 1M rather than 300000 or 1e6 (the unit is in the label), plain numbers
    below 10k (no 500m for half a second); a log axis over less than two decades gets ticks at
    1, 2 and 5 of each decade, none unlabelled."""
    from matplotlib.ticker import EngFormatter, LogLocator, NullFormatter, StrMethodFormatter

    target = ax.xaxis if axis == "x" else ax.yaxis
    lo, hi = sorted(ax.get_xlim() if axis == "x" else ax.get_ylim())
    log = (ax.get_xscale() if axis == "x" else ax.get_yscale()) == "log"
    if log:
        subs = (1.0, 2.0, 5.0) if lo > 0 and hi / lo < 100 else (1.0,)
        target.set_major_locator(LogLocator(subs=subs))
        target.set_minor_formatter(NullFormatter())
    if hi >= ENG_FROM:
        target.set_major_formatter(EngFormatter(sep=""))
    elif log:
        target.set_major_formatter(StrMethodFormatter("{x:g}"))


def _legend(ax: Axes) -> None:
    """A legend of the labelled lines that show inside the axes' limits: a point inside for a
    line with markers, two points (one inside) for a line without, as one point of it draws
    nothing. A line whose data all fell outside (the N / window bound at large N) gets no entry."""
    import numpy as np

    (xlo, xhi), (ylo, yhi) = sorted(ax.get_xlim()), sorted(ax.get_ylim())
    shown = []
    for line in ax.get_lines():
        xy = np.asarray(line.get_xydata(), dtype=float)
        inside = (xy[:, 0] >= xlo) & (xy[:, 0] <= xhi) & (xy[:, 1] >= ylo) & (xy[:, 1] <= yhi)
        marked = line.get_marker() not in (None, "None", "", " ")
        if str(line.get_label()).startswith("_") or not inside.any():
            continue
        if marked or len(xy) >= 2:
            shown.append(line)
    if shown:
        ax.legend(handles=shown, fontsize=8, loc="best")
