"""wheel-engine side by side with asyncio, uvloop, APScheduler, huey and raw SQLite.

``wheel-engine bench`` (and ``make bench``) calls :func:`main`. It runs the figures of issue 4,
prints a table per figure with each contender's ratio to the anchor measured in the same run
(median and spread over interleaved rounds), prints the targets as met/missed (never asserted),
writes ``results.json`` and PNG plots to ``--out``. Peers that are not installed are skipped
with a line saying so. ``--quick`` (CI) runs every figure small, in well under a minute.

Exit status: 0 when the benchmark ran (whatever the figures say), 1 when a figure's own code
failed (or, with ``--strict``, when any contender failed), 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import importlib
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from bench.compare.config import Config
    from bench.compare.measure import Comparison

__all__ = ["FIGURES", "main"]

#: name -> (figure number, module name). A new figure joins with one line here: its module
#: ``bench.compare.<module>`` has ``run(cfg, series) -> list[Comparison]`` and may have
#: ``targets(cfg) -> list[Target]`` (collected by :func:`bench.compare.targets.targets_for`).
FIGURES: dict[str, tuple[str, str]] = {
    "inmemory": ("1", "inmemory"),
    "lateness": ("2", "lateness"),
    "memory": ("3", "memory"),
    "durable": ("4", "durable"),
    "firing": ("5", "firing"),
    "recovery": ("6", "recovery"),
    "scaling": ("7", "scaling"),
    "nodes": ("8", "nodes"),
    "transactional": ("9", "transactional"),
    "mass_expiry": ("10", "mass_expiry"),
    "mass_expiry_pg": ("10", "mass_expiry_pg"),  # its PostgreSQL half: needs a server
}


def _parse_only(text: str | None) -> list[str]:
    if not text:
        return list(FIGURES)
    by_number: dict[str, list[str]] = {}  # a number may name several halves (10)
    for name, (num, _) in FIGURES.items():
        by_number.setdefault(num, []).append(name)
    chosen: list[str] = []
    for raw in text.split(","):
        item = raw.strip().lower()
        if not item:
            continue
        names = by_number.get(item, [item])
        if any(name not in FIGURES for name in names):
            raise argparse.ArgumentTypeError(
                f"unknown figure {raw!r}; choose from {', '.join(FIGURES)} (or 1-{len(by_number)})"
            )
        chosen += [name for name in names if name not in chosen]
    return [n for n in FIGURES if n in chosen]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="wheel-engine bench",
        description="Benchmark wheel-engine side by side with asyncio, uvloop, APScheduler, "
        "huey and raw sqlite3; print ratios, write results.json and plots.",
    )
    p.add_argument("--quick", action="store_true", help="small sizes, under a minute (CI)")
    p.add_argument(
        "--out",
        default="bench/results",
        metavar="DIR",
        help="where results.json and the PNG plots go (default: bench/results/)",
    )
    p.add_argument(
        "--only",
        metavar="FIGURE[,FIGURE]",
        help=f"run only these figures: {', '.join(FIGURES)} (or their numbers 1-{len(FIGURES)})",
    )
    p.add_argument(
        "--rounds",
        type=int,
        metavar="N",
        help="interleaved rounds per comparison (default: 5 in memory, 3 elsewhere; quick: 1-3)",
    )
    p.add_argument("--no-plots", action="store_true", help="do not draw PNG plots")
    p.add_argument(
        "--docs",
        metavar="DIR",
        help="also put the results into DIR/benchmarks.md (between its results markers) "
        "and the plots into DIR/img/ (maintainers: --docs docs)",
    )
    p.add_argument(
        "--beside",
        metavar="RESULTS_JSON",
        help="report another run's figures beside this run's (its results.json, e.g. the pure "
        "build's run beside the compiled one's); in the printed targets and in results.md",
    )
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.add_argument(
        "--strict", action="store_true", help="exit 1 if any contender failed (not skipped)"
    )
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the comparison; see the module docstring. Returns the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        figures = _parse_only(args.only)
    except argparse.ArgumentTypeError as exc:
        parser.print_usage(sys.stderr)
        print(f"wheel-engine bench: error: {exc}", file=sys.stderr)
        return 2
    if args.rounds is not None and args.rounds < 1:
        parser.print_usage(sys.stderr)
        print("wheel-engine bench: error: --rounds must be at least 1", file=sys.stderr)
        return 2

    from bench.compare import beside, report
    from bench.compare.config import Config
    from bench.compare.machine import machine_info
    from bench.compare.measure import Log
    from bench.compare.targets import evaluate_targets, targets_for

    try:
        other = beside.load(Path(args.beside)) if args.beside else None
    except (OSError, ValueError) as exc:
        parser.print_usage(sys.stderr)
        print(f"wheel-engine bench: error: --beside: {exc}", file=sys.stderr)
        return 2
    log = Log(sys.stderr, verbose=not args.quiet)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="wheel-engine-bench-"))
    cfg = Config.make(args.quick, scratch, log)
    if args.rounds is not None:
        cfg.set_rounds(args.rounds)
    machine = machine_info()
    log(
        f"{'quick' if cfg.quick else 'full'} run of {', '.join(figures)} on the "
        f"{machine['build']} build; "
        f"{machine['nproc']} CPUs ({machine['cpu']}), Python {machine['python']}"
    )
    try:
        run = _run_figures(figures, cfg)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    by_key = {c.key: c for c in run.comparisons}
    targets = evaluate_targets(
        [t for t in targets_for(cfg) if t.comparison.split(".")[0] in figures], by_key
    )
    results = report.Results(
        run.comparisons,
        targets,
        machine,
        command=_command_line(argv),
        elapsed=run.elapsed,
        series=run.series,
        quick=cfg.quick,
        beside=other,
    )
    report.print_summary(results)
    docs = Path(args.docs) if args.docs else None
    written, failed = report.write_outputs(out, results, plots=not args.no_plots, docs=docs)
    print()
    print("wrote " + ", ".join(str(p) for p in written))
    if failed or run.failed:
        return 1
    if args.strict and any(r.error for c in run.comparisons for r in c.results):
        return 1
    return 0


class _Run(NamedTuple):
    comparisons: list[Comparison]
    series: dict[str, Any]
    failed: bool  #: a figure's own code raised
    elapsed: float


def _run_figures(figures: list[str], cfg: Config) -> _Run:
    """Each figure module's ``run(cfg, series)``, in order; a figure that raises is reported
    and the others still run."""
    comparisons: list[Comparison] = []
    series: dict[str, Any] = {}
    failed = False
    t0 = time.perf_counter()
    for name in figures:
        num, module = FIGURES[name]
        cfg.log(f"figure {num}: {name}")
        mod = importlib.import_module(f"bench.compare.{module}")
        run: Callable[[Any, dict[str, Any]], list[Comparison]] = mod.run
        try:
            comparisons.extend(run(cfg, series))
        except Exception:
            failed = True
            print(f"figure {num} ({name}) failed:", file=sys.stderr)
            traceback.print_exc()
    return _Run(comparisons, series, failed, time.perf_counter() - t0)


def _command_line(argv: list[str] | None) -> str:
    """The command as typed, for the record in ``results.json``."""
    if argv is not None:
        return "wheel-engine bench" + (" " + " ".join(argv) if argv else "")
    typed = sys.argv[2:] if "bench" in sys.argv[1:2] else sys.argv[1:]
    return "wheel-engine bench" + (" " + " ".join(typed) if typed else "")


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
