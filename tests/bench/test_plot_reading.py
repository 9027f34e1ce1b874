"""What each benchmark plot tells its reader (``bench.compare.plots``), on the fixed results of
``test_bench_plots.py``: one sentence of what to see, ratios that read one way, no plot that
says "higher is better" over an axis saying "lower", one number per figure, no bar cut off."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import pytest

pytest.importorskip("matplotlib")

from matplotlib.patches import Rectangle
from matplotlib.text import Text
from test_bench_plots import MACHINE, comparison, fixed_comparisons, fixed_series, rendered

from bench.compare import plots

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: figure 8's panels: two node counts against one peer; fire rates spanning a decade (log axis)
NODES = [
    comparison(
        f"nodes.{n}",
        "8",
        {"peer, 1 worker(s)": [9e3 * n], "wheel-engine, node(s)": [95e3 * n]},
        params={"nodes": n, "timers": 10_000},
    )
    for n in (1, 2)
]


@pytest.fixture(scope="module")
def figs() -> dict[str, Figure]:
    return rendered(plots.figures([*fixed_comparisons(), *NODES], fixed_series(), MACHINE))


def texts(fig: Figure) -> list[str]:
    return [t.get_text().replace("\n", " ") for t in fig.findobj(Text) if t.get_text()]


def test_every_plot_says_what_to_see(figs: dict[str, Figure]) -> None:
    assert "nodes" in figs
    for stem, fig in figs.items():
        assert "What to see: " in fig.get_suptitle().replace("\n", " "), stem


def test_memory_says_what_it_shows_in_the_metric_s_own_direction(
    figs: dict[str, Figure],
) -> None:
    title = " ".join(figs["memory"].get_suptitle().split())
    # 388 B against 215 B: 1.8 times the memory, which the ratio column gives as 0.55x as good
    assert "wheel-engine: 1.80x the memory per pending timer of asyncio TimerHandle" in title
    assert "(lower is better)" in title


def test_no_plot_says_higher_is_better_over_an_axis_saying_lower(
    figs: dict[str, Figure],
) -> None:
    for stem, fig in figs.items():
        title = fig.get_suptitle().replace("\n", " ")
        labels = " ".join(ax.get_xlabel() + " " + ax.get_ylabel() for ax in fig.axes)
        if "lower is better" in labels:
            assert "higher is better" not in title, stem
        assert "ratio x" not in " ".join(texts(fig)), stem  # jargon: "times as good as"


def test_each_figure_number_names_one_plot(figs: dict[str, Figure]) -> None:
    numbers = {
        stem: re.match(r"Figure (\w+):", fig.get_suptitle()).group(1)  # type: ignore[union-attr]
        for stem, fig in figs.items()
    }
    assert len(set(numbers.values())) == len(numbers), numbers
    assert (numbers["throughput"], numbers["cancel"]) == ("1a", "1b")


def test_log_scale_bars_all_show(figs: dict[str, Figure]) -> None:
    """A bar on a log axis grows from the axis' left end: the anchor's, the smallest, was cut
    to nothing on figure 8."""
    for stem in ("nodes", "durable", "firing"):
        for ax in figs[stem].axes:
            bars = [p for p in ax.patches if isinstance(p, Rectangle) and p.get_width() > 0]
            if ax.get_xscale() != "log" or not bars:
                continue
            left = ax.get_xlim()[0]
            assert all(bar.get_width() >= 3 * left for bar in bars), stem
            assert "read the ratios" in ax.get_xlabel(), stem


def test_figure_8_names_only_what_it_draws(figs: dict[str, Figure]) -> None:
    shown = " ".join(texts(figs["nodes"]))
    assert "fired per second" in shown
    assert "lag" not in shown and "schedule rate" not in shown


def test_every_published_plot_has_a_caption_saying_what_to_see() -> None:
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "benchmarks.md").read_text()
    section = page.split("## Plots\n", 1)[1].split("\n## ", 1)[0]
    images = re.findall(r"^!\[(Figure (\w+)[^\]]*)\]\(img/(\w+)\.png\)$", section, re.MULTILINE)
    assert {stem for _, _, stem in images} >= {"throughput", "cancel", "memory", "nodes"}
    numbers = [number for _, number, _ in images]
    assert len(set(numbers)) == len(numbers), numbers
    for _, number, _ in images:
        assert f"*Figure {number}. What to see: " in section, number


def test_no_axis_label_runs_past_its_panel(figs: dict[str, Figure]) -> None:
    """Stacked panels are shorter than a rotated axis label: figure 8's right-hand "times as good
    as the anchor" ran into the panels above and below. Every y-axis label stays within the
    height of its own panel."""
    renderer = next(iter(figs.values())).canvas.get_renderer()  # type: ignore[attr-defined]
    for stem, fig in figs.items():
        for ax in fig.axes:
            label = ax.yaxis.label
            if not label.get_text():
                continue
            box, panel = label.get_window_extent(renderer), ax.get_window_extent(renderer)
            assert panel.y0 - 1 <= box.y0 and box.y1 <= panel.y1 + 1, (stem, label.get_text())
