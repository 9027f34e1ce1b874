"""What every plot of the comparison shares: the figure, its titles, its axes, its legend.

Guaranteed (``tests/bench/test_bench_plots.py`` checks it on every plot): the layout is
constrained and long titles are wrapped, so no label is cut off; an axis whose values span a
decade or more is logarithmic (:func:`scale`); a legend names only the lines drawn inside the
axes (:func:`legend`).
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "DECADE",
    "DPI",
    "ENG_FROM",
    "ONE_RUN",
    "STYLE",
    "TITLE_CHARS",
    "WIDTH_IN",
    "engineering",
    "figure",
    "legend",
    "new_figure",
    "scale",
    "titles",
    "wrap",
    "wrap_to",
]

WIDTH_IN = 8.0  #: every plot's width in inches (the docs page shows them at this size)
DPI = 100  #: pixels per inch of the PNGs
TITLE_CHARS = 115  #: a title line is wrapped beyond this many characters (fits WIDTH_IN at 9.5 pt)
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
    "wheel-engine schedule() + fire": ("C0", "-", "o"),
    "wheel-engine schedule() + cancel()": ("C0", "-", "o"),
    "asyncio call_at + fire": ("C1", "-", "^"),
    "asyncio call_at + TimerHandle.cancel()": ("C1", "-", "^"),
    "uvloop call_at": ("C2", "-", "v"),
}


def new_figure(height_in: float) -> Figure:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(WIDTH_IN, height_in), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def figure(height_in: float) -> tuple[Figure, Axes]:
    fig = new_figure(height_in)
    return fig, fig.subplots()


def wrap(text: str) -> str:
    return wrap_to(text, TITLE_CHARS)


def wrap_to(text: str, chars: int) -> str:
    return "\n".join(textwrap.wrap(text, chars))


def titles(fig: Figure, headline: str, provenance: str) -> None:
    """The title: what the plot compares, then where its ratios come from (one run, one
    machine). A suptitle, so the constrained layout makes room for all its lines."""
    fig.suptitle(f"{wrap(headline)}\n{wrap(provenance)}", fontsize=9.5)


def scale(ax: Axes, axis: str, values: Sequence[float]) -> None:
    """Log when the positive values span a decade or more, else linear from zero."""
    positive = [v for v in values if v > 0 and math.isfinite(v)]
    log = bool(positive) and max(positive) / min(positive) >= DECADE
    if log:
        ax.set_xscale("log") if axis == "x" else ax.set_yscale("log")
    elif axis == "x":
        ax.set_xlim(left=0)
    else:
        ax.set_ylim(bottom=0)


def engineering(ax: Axes, axis: str) -> None:
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


def legend(ax: Axes) -> None:
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
