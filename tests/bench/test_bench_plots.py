"""The benchmark plots, drawn from a small fixed set of results (no benchmark runs here).

Checks what a reader of the PNGs relies on: a plot per figure, a title saying what is compared
and that the ratios come from one run on one machine, no text cut off at the figure's edge, a
legend naming exactly the lines that are visible, log axes where values span decades.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

pytest.importorskip("matplotlib")

from matplotlib.text import Text

from bench.compare import plots
from bench.compare.measure import Comparison, ContenderResult, Ratio

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.transforms import Bbox

MACHINE = "2 CPUs, test CPU, Python 3.11"
#: windows of the in-memory sweep: N / window crosses the contenders at small N (0.05), is in
#: view at the smallest N only (0.03), is far above them all (1 us)
WINDOWS = [0.05, 0.03, 1e-6]
ALL_PLOTS = {
    "throughput",
    "cancel",
    "lateness",
    "memory",
    "durable",
    "firing",
    "recovery",
    "scaling",
}
#: figure 7's fixed figures: CPU seconds per timer by pending N, per contender (three rounds)
SCALING = {
    "wheel-engine schedule() + fire": {10_000: 3.1e-6, 100_000: 3.2e-6, 10_000_000: 3.4e-6},
    "asyncio call_at + fire": {10_000: 2.0e-6, 100_000: 2.6e-6, 10_000_000: 4.4e-6},
    "wheel-engine schedule() + cancel()": {10_000: 3.5e-6, 100_000: 3.6e-6, 10_000_000: 3.7e-6},
    "asyncio call_at + TimerHandle.cancel()": {10_000: 2.2e-6, 100_000: 2.7e-6, 10_000_000: 5e-6},
}


def comparison(
    key: str,
    figure: str,
    values: dict[str, list[float]],
    *,
    unit: str = "timers/s",
    metric: str = "rate",
    higher: bool = True,
    skipped: dict[str, str] | None = None,
    params: dict[str, Any] | None = None,
) -> Comparison:
    """A comparison whose first contender is the anchor; ratios per round, as measure does."""
    anchor = next(iter(values))
    results = [ContenderResult(n, reps=[{metric: v} for v in vs]) for n, vs in values.items()]
    results += [ContenderResult(n, skipped=why) for n, why in (skipped or {}).items()]
    ratios = {}
    for name, vs in values.items():
        per = [(v / a if higher else a / v) for v, a in zip(vs, values[anchor], strict=True)]
        ratios[name] = Ratio(statistics.median(per), min(per), max(per), len(per))
    return Comparison(
        key=key,
        figure=figure,
        title=f"figure {figure}, {key}",
        metric=metric,
        unit=unit,
        higher_is_better=higher,
        anchor=anchor,
        params=params or {"n": 30_000},
        results=results,
        ratios=ratios,
    )


def fixed_comparisons() -> list[Comparison]:
    loops = {"asyncio call_at": [450e3, 460e3], "wheel-engine schedule()": [230e3, 240e3]}
    return [
        comparison("inmemory.e2e", "1", loops, params={"n": 30_000}),
        comparison("inmemory.cancel", "1", loops, skipped={"uvloop call_at": "not installed"}),
        comparison("inmemory.sweep.100000", "1", loops, params={"n": 100_000, "sweep": True}),
        comparison(
            "lateness",
            "2",
            {"asyncio call_at": [0.004, 0.01], "wheel-engine": [0.002, 0.006]},
            unit="s",
            metric="p99",
            higher=False,
        ),
        comparison(
            "memory",
            "3",
            {"asyncio TimerHandle": [215.0], "wheel-engine": [388.0]},
            unit="B/timer",
            metric="bytes_per_timer",
            higher=False,
        ),
        comparison(
            "durable.full",
            "4",
            {
                "raw sqlite3 (full, 1,000/txn)": [640e3, 630e3],
                "APScheduler 3 add_job": [1.2e3, 1.3e3],
            },
            skipped={"huey SqliteHuey schedule": "huey is not installed (pip install huey)"},
        ),
        comparison(
            "durable.normal", "4", {"raw sqlite3": [740e3, 750e3], "wheel-engine": [270e3, 280e3]}
        ),
        comparison("firing", "5", {"APScheduler 3": [1.1e3], "wheel-engine (full)": [128e3]}),
        *(
            comparison(
                f"recovery.{n}",
                "6",
                {"raw read": [t], "wheel-engine start()": [3 * t]},
                unit="s",
                metric="seconds",
                higher=False,
            )
            for n, t in ((10_000, 0.007), (1_000_000, 1.2))
        ),
        *scaling_comparisons(),
    ]


def scaling_comparisons() -> list[Comparison]:
    """Figure 7's per-size comparisons, as the figure makes them (a series: no bars of their
    own while the series is there)."""
    comps = []
    for op in ("fire", "cancel"):
        names = [n for n in SCALING if n.endswith("fire") == (op == "fire")]
        anchor = next(n for n in names if n.startswith("asyncio"))
        for n in SCALING[anchor]:
            values = {name: [SCALING[name][n] * f for f in (0.95, 1.0, 1.1)] for name in names}
            values = {anchor: values.pop(anchor), **values}
            comps.append(
                comparison(
                    f"scaling.{op}.{n}",
                    "7",
                    values,
                    unit="s",
                    metric="cpu_per_timer",
                    higher=False,
                    params={"pending": n, "ops": 20_000, "sweep": True},
                )
            )
    return comps


def fixed_series(window: float = 0.05) -> dict[str, Any]:
    sweep = {
        "asyncio call_at": {"10000": 197e3, "30000": 455e3, "100000": 377e3},
        "wheel-engine schedule()": {"10000": 145e3, "30000": 235e3, "100000": 104e3},
    }
    cdf = [[q / 10, -0.0005 + q * 0.001] for q in range(11)]
    points = {
        name: {str(n): [v, v * 0.95, v * 1.1] for n, v in by_n.items()}
        for name, by_n in SCALING.items()
    }
    return {
        "cpu_vs_pending": {
            "ops": 20_000,
            "points": points,
            "skipped": {"1000000": "does not fit: needs about 9.9 GB more, 6.1 GB available"},
        },
        "throughput_vs_n": {"unit": "timers/s", "window_s": window, "data": sweep},
        "lateness_cdf": {
            "n": 20_000,
            "window_s": 0.5,
            "data": {"asyncio call_at": cdf, "wheel-engine": [[q, v + 0.001] for q, v in cdf]},
        },
    }


def rendered(figs: dict[str, Figure]) -> dict[str, Figure]:
    for fig in figs.values():
        fig.canvas.draw()  # runs the constrained layout, as saving does
    return figs


@pytest.fixture(scope="module")
def figs() -> dict[str, Figure]:
    """Every plot of the fixed results, laid out (once: drawing is slow)."""
    return rendered(plots.figures(fixed_comparisons(), fixed_series(), MACHINE))


def line_plots(window: float) -> dict[str, Figure]:
    """The plots with legends, for a sweep window (the bound N / window moves with it)."""
    series, by_key = fixed_series(window), {c.key: c for c in fixed_comparisons()}
    throughput = plots.throughput(series, by_key["inmemory.e2e"], MACHINE)
    lateness = plots.lateness(series, by_key["lateness"], MACHINE)
    scaling = plots.scaling(series, None, MACHINE)
    assert throughput is not None and lateness is not None and scaling is not None
    return rendered({"throughput": throughput, "lateness": lateness, "scaling": scaling})


def test_every_figure_gets_a_png(tmp_path: Path) -> None:
    made = plots.draw(fixed_comparisons(), fixed_series(), tmp_path, MACHINE)
    assert {p.stem for p in made} == ALL_PLOTS
    for path in made:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", path


def test_without_series_the_line_figures_become_bars() -> None:
    figs = rendered(plots.figures(fixed_comparisons(), {}, MACHINE))
    assert set(figs) == ALL_PLOTS
    for stem, fig in figs.items():
        assert_titled(stem, fig)
        assert_nothing_cut_off(stem, fig)


def test_titles_say_what_and_one_run_on_one_machine(figs: dict[str, Figure]) -> None:
    for stem, fig in figs.items():
        assert_titled(stem, fig)


def test_no_text_is_cut_off(figs: dict[str, Figure]) -> None:
    for stem, fig in figs.items():
        assert_nothing_cut_off(stem, fig)


@pytest.mark.parametrize("window", WINDOWS)
def test_legend_names_exactly_the_visible_lines(window: float) -> None:
    for stem, fig in line_plots(window).items():
        assert_nothing_cut_off(stem, fig)
        for ax in fig.axes:  # the scaling plot has a panel (and a legend) per operation mix
            assert sorted(legend_names(ax)) == sorted(visible_lines(ax)), stem
        named = legend_names(fig.axes[0])
        if stem == "throughput":
            # at a window of 1 us the bound (N / window) is far above every contender
            assert any("bound" in name for name in named) is (window > 1e-3)


def legend_names(ax: Axes) -> list[str]:
    legend = ax.get_legend()
    assert legend is not None
    return [t.get_text() for t in legend.get_texts()]


def assert_titled(stem: str, fig: Figure) -> None:
    title = fig.get_suptitle().replace("\n", " ")
    assert title.startswith("Figure "), stem
    assert " against " in title, stem
    assert "one run on one machine" in title and MACHINE in title, stem


def assert_nothing_cut_off(stem: str, fig: Figure) -> None:
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    edge = fig.bbox.padded(1.0)  # a pixel of slack for rounding
    title = [t for t in fig.findobj(Text) if t.get_text() == fig.get_suptitle()]
    parts: list[tuple[str, Bbox | None]] = [("title", title[0].get_window_extent(renderer))]
    # an axes' tight box covers what is drawn of it: tick labels, axis labels, title, legend
    parts += [(ax.get_title() or ax.get_ylabel(), ax.get_tightbbox(renderer)) for ax in fig.axes]
    for what, box in parts:
        assert box is not None
        assert edge.x0 <= box.x0 and box.x1 <= edge.x1, f"{stem}: {what!r} cut off"
        assert edge.y0 <= box.y0 and box.y1 <= edge.y1, f"{stem}: {what!r} cut off"


def visible_lines(ax: Axes) -> list[str]:
    """Labels of the lines that show inside the axes on screen: a point inside for a line with
    markers, two points with one inside for a line without (one point of it draws nothing)."""
    box = ax.get_window_extent().padded(1.0)
    labels = []
    for line in ax.get_lines():
        label = str(line.get_label())
        if label.startswith("_") or not line.get_visible() or line.get_alpha() == 0:
            continue
        points = line.get_transform().transform(line.get_xydata())
        inside = any(box.x0 <= x <= box.x1 and box.y0 <= y <= box.y1 for x, y in points)
        marked = line.get_marker() not in (None, "None", "", " ")
        if inside and (marked or len(points) >= 2):
            labels.append(label)
    return labels


def test_axes_go_logarithmic_where_values_span_decades(figs: dict[str, Figure]) -> None:
    assert figs["durable"].axes[0].get_xscale() == "log"  # 1.2k..640k timers/s
    assert figs["firing"].axes[0].get_xscale() == "log"  # 1.1k..128k
    assert figs["memory"].axes[0].get_xscale() == "linear"  # 215..388 B
    assert figs["throughput"].axes[0].get_xscale() == "log"  # N from 10k to 100k
    for ax in figs["scaling"].axes:
        assert ax.get_xscale() == "log"  # N pending from 10k to 10M
        assert ax.get_yscale() == "linear"  # 1.9..5.5 us: within a decade


def test_the_scaling_plot_says_its_units_growth_and_what_was_skipped(
    figs: dict[str, Figure],
) -> None:
    fire, cancel = figs["scaling"].axes
    for ax in (fire, cancel):
        assert ax.get_ylabel() == "CPU per timer (us)"
        assert "not measured (memory): 1,000,000" in ax.get_xlabel()
        assert [t.get_text() for t in ax.get_xticklabels()] == ["10,000", "100,000", "10,000,000"]
    assert fire.get_title().startswith("schedule + fire")
    named = sorted(legend_names(fire))
    # growth: the median at the largest N over the median at the smallest
    assert named == [
        "asyncio call_at + fire (growth 2.20x)",
        "wheel-engine schedule() + fire (growth 1.10x)",
    ]


def test_scaling_without_its_series_becomes_bars_of_every_size() -> None:
    figs = rendered(plots.figures(scaling_comparisons(), {}, MACHINE))
    assert set(figs) == {"scaling"}
    assert len(figs["scaling"].axes) == 2 * 6  # a panel per comparison, each with its twin


def test_a_skipped_contender_is_named_not_drawn(figs: dict[str, Figure]) -> None:
    ax = figs["cancel"].axes[0]
    names = [t.get_text().replace("\n", " ") for t in ax.get_yticklabels()]
    assert any(n.startswith("uvloop call_at: not measured (not installed)") for n in names)
    assert len(ax.patches) == 2  # the two measured contenders' bars only
