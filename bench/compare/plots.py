"""PNG plots (matplotlib, Agg backend): throughput against N, and the lateness distribution."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def matplotlib_missing() -> str | None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return "matplotlib not installed (pip install 'wheel-engine[bench]')"
    return None


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


STYLE = {
    "wheel-engine schedule_many()": ("C0", "-", "o"),
    "wheel-engine schedule()": ("C0", "--", "s"),
    "wheel-engine": ("C0", "-", None),
    "wheel-engine on uvloop": ("C4", "-.", None),
    "asyncio call_at": ("C1", "-", "^"),
    "uvloop call_at": ("C2", "-", "v"),
}


def throughput(series: dict[str, Any], path: Path, subtitle: str) -> Path | None:
    data: dict[str, dict[str, float]] = series.get("data", {})
    if not data:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=100)
    for name, points in data.items():
        xs = sorted(int(k) for k in points)
        ys = [points[str(x)] for x in xs]
        color, ls, marker = STYLE.get(name, (None, "-", "o"))
        ax.plot(xs, ys, label=name, color=color, linestyle=ls, marker=marker)
    window = series.get("window_s")
    if window:
        xs_all = sorted({int(k) for points in data.values() for k in points})
        ymax = max(v for points in data.values() for v in points.values())
        bound = [(x, x / window) for x in xs_all if x / window <= ymax * 1.2]
        if bound:
            ax.plot(
                [b[0] for b in bound],
                [b[1] for b in bound],
                color="grey",
                linestyle=":",
                label="N / window (bound by the window)",
            )
    ax.set_xscale("log")
    ax.set_xlabel("timers scheduled then fired (N)")
    ax.set_ylabel("timers / s, end to end")
    ax.set_title(
        f"In memory, end to end (window {series.get('window_s', '?')} s)\n{subtitle}", fontsize=9
    )
    ax.grid(True, which="both", alpha=0.3)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def lateness(series: dict[str, Any], path: Path, subtitle: str) -> Path | None:
    data: dict[str, list[list[float]]] = series.get("data", {})
    if not data:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=100)
    for name, cdf in data.items():
        qs = [q for q, _ in cdf]
        xs = [v * 1e3 for _, v in cdf]
        color, ls, _ = STYLE.get(name, (None, "-", None))
        ax.plot(xs, qs, label=name, color=color, linestyle=ls)
    ax.set_xscale("symlog", linthresh=1.0)
    ax.axvline(0.0, color="red", linewidth=0.8)
    ax.text(0.0, 0.02, " due", color="red", fontsize=8)
    ax.set_xlabel(
        "fired minus due (ms, wall clock; linear within +-1 ms, log beyond); left of red = early"
    )
    ax.set_ylabel("fraction of timers")
    n = series.get("n", 0)
    ax.set_title(
        f"Lateness of {n:,} timers over {series.get('window_s', '?')} s (CDF)\n{subtitle}",
        fontsize=9,
    )
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def draw(series: dict[str, Any], out: Path, subtitle: str) -> list[Path]:
    made: list[Path] = []
    if "throughput_vs_n" in series:
        p = throughput(series["throughput_vs_n"], out / "throughput.png", subtitle)
        if p:
            made.append(p)
    if "lateness_cdf" in series:
        p = lateness(series["lateness_cdf"], out / "lateness.png", subtitle)
        if p:
            made.append(p)
    return made
