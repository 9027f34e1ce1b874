"""PNG plots, one per figure of the comparison (matplotlib's Agg canvas, never pyplot).

Files: ``throughput.png`` (1: in memory against N), ``cancel.png`` (1: the cancel mix),
``lateness.png`` (2: the CDF), ``memory.png`` (3), ``durable.png`` (4: full and normal),
``firing.png`` (5), ``recovery.png`` (6: one panel per size), ``scaling.png`` (7: CPU per
timer against timers pending, one panel per operation mix).

Guaranteed: every plot's title says what it compares, what a reader should see in it (one
sentence from the figures, "What to see: ..."), and that its ratios come from one run on one
machine; every ratio reads the same way, "times as good as the anchor" (above 1x is better,
whichever way the metric itself runs, which its axis says); figure 1's two plots are 1a and 1b;
a bar plot on a log axis starts below its smallest whisker, so no bar (the anchor's among them)
is cut off; a legend names only lines drawn inside the axes; the layout is constrained and long
titles are wrapped, so no label is cut off (``tests/bench/test_bench_plots.py`` checks both);
an axis whose values span a decade or more is logarithmic (:mod:`bench.compare.plotkit`). Not
guaranteed: that two contenders with equal figures stay apart (they are told apart by line
style and marker, not by position).
"""

from __future__ import annotations

import statistics
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.compare import plotkit as kit
from bench.compare.units import fmt_ratio

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from bench.compare.measure import Comparison

__all__ = ["draw", "figures", "matplotlib_missing"]

NAME_CHARS = 30  #: a contender's name beside its bar is wrapped beyond this many characters
#: on a log axis, bars start this many times below the smallest value drawn (a quarter decade+)
LOG_FLOOR = 4.0
#: what every ratio means, on every plot
RATIO_WORDS = "times as good as"


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
    "throughput": "Figure 1a: in memory, end to end, wheel-engine against asyncio and uvloop",
    "lateness": "Figure 2: lateness, wheel-engine against asyncio and uvloop call_at",
    "cancel": "Figure 1b: in memory, cancel-heavy mix, wheel-engine against asyncio and uvloop",
    "memory": "Figure 3: memory per pending timer, wheel-engine against asyncio and uvloop",
    "durable": "Figure 4: durable scheduling, wheel-engine against raw sqlite3, APScheduler, huey",
    "firing": "Figure 5: firing due durable timers, wheel-engine against APScheduler and huey",
    "recovery": "Figure 6: recovery (start-up), wheel-engine against a raw read of the rows",
    "scaling": "Figure 7: CPU per timer by timers pending, wheel-engine against asyncio call_at",
    "nodes": "Figure 8: timers fired per second by node processes sharing one PostgreSQL",
}


def reading(comp: Comparison | None) -> str | None:
    """One sentence of what ``comp`` shows: wheel-engine's median ratio to the anchor, in the
    metric's own direction ("2.1x the timers handled per second of asyncio", "0.6x the memory
    per pending timer of asyncio (lower is better)"); None without a ratio to quote."""
    if comp is None:
        return None
    subject = next((r.name for r in comp.results if r.name.startswith("wheel-engine")), None)
    ratio = comp.ratios.get(subject) if subject is not None else None
    if subject is None or ratio is None or subject == comp.anchor or not ratio.median:
        return None
    what = METRIC_WORDS.get(comp.metric, comp.metric)
    if comp.higher_is_better:
        return f"{subject}: {fmt_ratio(ratio.median)}x the {what} of {comp.anchor}"
    # the ratio is anchor / value here: the value is 1/ratio times the anchor's
    return (
        f"{subject}: {fmt_ratio(1 / ratio.median)}x the {what} of {comp.anchor} (lower is better)"
    )


def what_to_see(comps: Sequence[Comparison | None], fallback: str) -> str:
    """The plot's sentence for its reader: each panel's reading, or ``fallback``."""
    readings = [r for r in map(reading, comps) if r is not None]
    return "What to see: " + ("; ".join(readings) if readings else fallback) + "."


def matplotlib_missing() -> str | None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return "matplotlib not installed (pip install ./bench, from a checkout of wheel-engine)"
    return None


def draw(
    comparisons: Sequence[Comparison], series: dict[str, Any], out: Path, machine: str
) -> list[Path]:
    """Write every plot the results allow into ``out``; returns the files written."""
    made = []
    for stem, fig in figures(comparisons, series, machine).items():
        path = out / f"{stem}.png"
        fig.savefig(path, dpi=kit.DPI)
        made.append(path)
    return made


def figures(
    comparisons: Sequence[Comparison], series: dict[str, Any], machine: str
) -> dict[str, Figure]:
    """Each plot by file stem, not yet written. A comparison whose own plot has no data (the
    sweep, the CDF, the scaling series) is drawn as bars instead, so every measured figure
    gets a plot."""
    by_key = {c.key: c for c in comparisons}
    made: dict[str, Figure] = {}
    drawn = set()
    for stem, key, plot in LINE_PLOTS:
        fig = plot(series, by_key.get(key), machine)
        if fig is not None:
            made[stem] = fig
            drawn.add(stem)
    groups: dict[str, list[Comparison]] = {}
    for comp in comparisons:
        if _stem(comp.key) not in drawn:
            groups.setdefault(_stem(comp.key), []).append(comp)
    for stem, comps in groups.items():
        # a series' points are bars only where nothing else of the figure is
        plain = [c for c in comps if not c.params.get("sweep")]
        made[stem] = bars(plain or comps, stem, machine)
    return made


def _stem(key: str) -> str:
    """The file a comparison's plot goes to: ``durable.full`` and ``durable.normal`` share one,
    figure 1's sweep is part of ``throughput``."""
    if key.startswith("inmemory.sweep."):
        return "throughput"
    return {"inmemory.cancel": "cancel", "inmemory.e2e": "throughput"}.get(key, key.split(".")[0])


# ---------------------------------------------------------------------------------------------
# the two line plots


def throughput(series: dict[str, Any], comp: Comparison | None, machine: str) -> Figure | None:
    """Figure 1: timers/s against N per contender, with the N / window bound."""
    sweep = series.get("throughput_vs_n", {})
    data: dict[str, dict[str, float]] = sweep.get("data", {})
    if not any(data.values()):
        return None
    fig, ax = kit.figure(4.6)
    ax.set_xscale("log")
    ratios = _ratio_notes(comp)
    for name, points in data.items():
        xs = sorted(int(k) for k in points)
        color, ls, marker = kit.STYLE.get(name, (None, "-", "o"))
        label = name + (f" ({ratios[name]})" if name in ratios else "")
        ax.plot(xs, [points[str(x)] for x in xs], label=label, color=color, ls=ls, marker=marker)
    values = [v for points in data.values() for v in points.values()]
    kit.scale(ax, "y", values)
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
    kit.engineering(ax, "y")
    ax.grid(True, which="both", alpha=0.3)
    n = f" at N={comp.params['n']:,}" if comp is not None else ""
    kit.titles(
        fig,
        "Figure 1a: in memory, end to end, timers/s by N: wheel-engine against asyncio and "
        f"uvloop call_at (window {window} s). "
        + what_to_see([comp], "timers/s by N, higher is better"),
        f"{kit.ONE_RUN} ({machine}); ratios in the legend{n}: {RATIO_WORDS} "
        f"{comp.anchor if comp else 'the anchor'}, median of rounds (above 1x is better)",
    )
    kit.legend(ax)
    return fig


def lateness(series: dict[str, Any], comp: Comparison | None, machine: str) -> Figure | None:
    """Figure 2: the CDF of fired minus due of each contender's median-p99 round."""
    cdfs: dict[str, list[list[float]]] = series.get("lateness_cdf", {}).get("data", {})
    if not any(cdfs.values()):
        return None
    fig, ax = kit.figure(4.6)
    ratios = _ratio_notes(comp, "p99 ")
    for name, cdf in cdfs.items():
        color, ls, _ = kit.STYLE.get(name, (None, "-", None))
        label = name + (f" ({ratios[name]})" if name in ratios else "")
        ax.plot([v * 1e3 for _, v in cdf], [q for q, _ in cdf], label=label, color=color, ls=ls)
    ax.set_xscale("symlog", linthresh=1.0)
    ax.axvline(0.0, color="red", lw=0.8, label="due (left of it: early, which must not happen)")
    ax.set_xlabel("fired minus due (ms, wall clock; linear within ±1 ms, logarithmic beyond)")
    ax.set_ylabel("fraction of timers fired")
    ax.set_ylim(0.0, 1.02)
    ax.grid(True, which="both", alpha=0.3)
    lat = series["lateness_cdf"]
    kit.titles(
        fig,
        f"Figure 2: lateness of {lat.get('n', 0):,} timers due over {lat.get('window_s', '?')} s "
        "(CDF): wheel-engine against asyncio and uvloop call_at. "
        + what_to_see([comp], "the further left a curve, the less late its timers"),
        f"{kit.ONE_RUN} ({machine}), each contender's median-p99 round; p99 in the legend: "
        f"{RATIO_WORDS} {comp.anchor if comp else 'the anchor'} (above 1x: less late)",
    )
    kit.legend(ax)
    return fig


def _ratio_notes(comp: Comparison | None, what: str = "") -> dict[str, str]:
    """``"0.57x"`` (after ``what``) per contender of ``comp``; the anchor's is ``"anchor"``."""
    if comp is None:
        return {}
    notes = {name: f"{what}{fmt_ratio(r.median)}x" for name, r in comp.ratios.items()}
    if comp.anchor in notes:
        notes[comp.anchor] = "anchor"
    return notes


def scaling(series: dict[str, Any], comp: Comparison | None, machine: str) -> Figure | None:
    """Figure 7: CPU per timer against timers pending, a panel per operation mix; each
    contender's median of rounds as a line, its min..max as a band."""
    data = series.get("cpu_vs_pending", {})
    points: dict[str, dict[str, list[float]]] = data.get("points", {})
    if not any(points.values()):
        return None
    from bench.compare.scaling import ASYNCIO, ENGINE, OPS

    fig = kit.new_figure(7.0)
    axes = fig.subplots(len(OPS), 1, squeeze=False)[:, 0]
    skipped = ", ".join(f"{int(n):,}" for n in data.get("skipped", {}))
    for ax, op in zip(axes, OPS, strict=True):
        _scaling_panel(ax, points, [ENGINE[op], ASYNCIO[op]])
        ax.set_title(f"{OPS[op]}, {data.get('ops', 0):,} operations a round", fontsize=9)
        ax.set_xlabel(
            "timers pending (N)" + (f"; not measured (memory): {skipped}" if skipped else "")
        )
        ax.set_ylabel("CPU per timer (us)")
    kit.titles(
        fig,
        "Figure 7: in memory, CPU per timer by timers pending: wheel-engine (a timing wheel) "
        "against asyncio call_at (a binary heap). What to see: how each one's cost per timer "
        "grows with the timers pending (its growth is in the legend).",
        f"{kit.ONE_RUN} ({machine}); median of rounds, band: min..max; lower is better; "
        "growth: cost at the largest N over cost at the smallest",
    )
    return fig


def _scaling_panel(ax: Axes, points: dict[str, dict[str, list[float]]], names: list[str]) -> None:
    ax.set_xscale("log")
    values: list[float] = []
    ns: set[int] = set()
    for name in names:
        pts = points.get(name, {})
        xs = sorted(int(k) for k in pts)
        if not xs:
            continue
        med, lo, hi = ([pts[str(x)][i] * 1e6 for x in xs] for i in range(3))
        color, ls, marker = kit.STYLE.get(name, (None, "-", "o"))
        growth = f" (growth {fmt_ratio(med[-1] / med[0])}x)" if len(xs) > 1 and med[0] else ""
        ax.plot(xs, med, label=name + growth, color=color, ls=ls, marker=marker)
        ax.fill_between(xs, lo, hi, color=color, alpha=0.2, lw=0)
        values += lo + hi
        ns.update(xs)
    kit.scale(ax, "y", values)
    ticks = sorted(ns)
    ax.set_xticks(ticks, [f"{n:,}" for n in ticks], minor=False)
    ax.xaxis.set_minor_formatter("")
    kit.engineering(ax, "y")
    ax.grid(True, which="both", alpha=0.3)
    kit.legend(ax)


#: The plots drawn from a run's series: file stem, the comparison whose ratios they quote (or
#: none), the function. A figure with a line plot of its own joins with one line here.
LINE_PLOTS: list[
    tuple[str, str, Callable[[dict[str, Any], Comparison | None, str], Figure | None]]
] = [
    ("throughput", "inmemory.e2e", throughput),
    ("lateness", "lateness", lateness),
    ("scaling", "", scaling),
]


# ---------------------------------------------------------------------------------------------
# bars: every other figure, one panel per comparison


def bars(comps: Sequence[Comparison], stem: str, machine: str) -> Figure:
    """Each contender's median as a bar, its min..max over rounds as a whisker, and its ratio to
    the anchor as the right-hand tick label; one panel per comparison."""
    heights = [0.9 + 0.38 * len(c.results) for c in comps]
    fig = kit.new_figure(1.1 + sum(heights))
    axes = fig.subplots(len(comps), 1, squeeze=False, height_ratios=heights)[:, 0]
    for ax, comp in zip(axes, comps, strict=True):
        _bar_panel(ax, comp)
    anchors = sorted({c.anchor for c in comps})
    headline = HEADLINES.get(
        stem, f"Figure {comps[0].figure}: {comps[0].title}, against {anchors[0]}"
    )
    kit.titles(
        fig,
        f"{headline}. {what_to_see(comps, 'the bars against the hatched one')}",
        f"{kit.ONE_RUN} ({machine}); right-hand column: {RATIO_WORDS} {' / '.join(anchors)} "
        "(the hatched bar), median over rounds; above 1x is better",
    )
    return fig


def _panel_title(comp: Comparison) -> str:
    """A panel's title: the comparison's, but for figure 8's, whose title also names the
    schedule rate and lag it measures and the plot does not draw."""
    if comp.key.startswith("nodes.") and "nodes" in comp.params:
        return f"{comp.params['nodes']} node process(es) on one PostgreSQL: timers fired per second"
    return comp.title


def _bar_panel(ax: Axes, comp: Comparison) -> None:
    scale, unit = _unit_scale(comp)
    ys = list(range(len(comp.results)))[::-1]
    measured: list[float] = []
    for y, res in zip(ys, comp.results, strict=True):
        vals = [v * scale for v in res.values(comp.metric)]
        if vals:
            _bar(ax, y, vals, _bar_colour(res.name), anchor=res.name == comp.anchor)
            measured += vals
    log = ""
    if measured:
        kit.scale(ax, "x", measured)
        if ax.get_xscale() == "log":  # bars grow from the axis' left end: start it low enough
            ax.set_xlim(left=min(v for v in measured if v > 0) / LOG_FLOOR)
            log = "\nlog axis: read the ratios, not the bar lengths"
    ax.set_yticks(ys, [_name_cell(comp, res.name) for res in comp.results], fontsize=8.5)
    right = ax.twinx()
    right.set_ylim(ax.get_ylim())
    right.set_yticks(ys, [_ratio_cell(comp, res.name) for res in comp.results], fontsize=8.5)
    # No axis label on that column: a rotated one is taller than a short panel and ran into
    # the panels beside it; the figure's subtitle says what the column is.
    better = "higher" if comp.higher_is_better else "lower"
    what = METRIC_WORDS.get(comp.metric, comp.metric)
    ax.set_xlabel(
        kit.wrap(f"{what} ({unit}), {better} is better; bar: median, whisker: min..max of rounds")
        + log
    )
    kit.engineering(ax, "x")
    ax.set_title(kit.wrap(_panel_title(comp)), fontsize=9)
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
    return kit.wrap_to(name, NAME_CHARS)


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
