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
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["FIGURES", "main"]

#: name -> (figure number, module name)
FIGURES: dict[str, tuple[str, str]] = {
    "inmemory": ("1", "inmemory"),
    "lateness": ("2", "lateness"),
    "memory": ("3", "memory"),
    "durable": ("4", "durable"),
    "firing": ("5", "firing"),
    "recovery": ("6", "recovery"),
}


def _parse_only(text: str | None) -> list[str]:
    if not text:
        return list(FIGURES)
    by_number = {num: name for name, (num, _) in FIGURES.items()}
    chosen: list[str] = []
    for raw in text.split(","):
        item = raw.strip().lower()
        if not item:
            continue
        name = by_number.get(item, item)
        if name not in FIGURES:
            raise argparse.ArgumentTypeError(
                f"unknown figure {raw!r}; choose from {', '.join(FIGURES)} (or 1-6)"
            )
        if name not in chosen:
            chosen.append(name)
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
        help=f"run only these figures: {', '.join(FIGURES)} (or their numbers 1-6)",
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
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.add_argument(
        "--strict", action="store_true", help="exit 1 if any contender failed (not skipped)"
    )
    return p


def _targets(cfg: Any) -> list[Any]:
    from bench.compare import durable, inmemory, lateness, memory, recovery
    from bench.compare.runner import Target

    ts = [
        Target(
            "in memory schedule_many vs asyncio call_at",
            "inmemory.e2e",
            inmemory.ENGINE_MANY,
            1.0,
            2.0,
        ),
        Target(
            "in memory schedule one by one vs asyncio call_at",
            "inmemory.e2e",
            inmemory.ENGINE_ONE,
            0.7,
        ),
        Target(
            "durable schedule_many (full) vs raw sqlite3",
            "durable.full",
            durable.many_name("full"),
            0.4,
            0.6,
        ),
        Target(
            "durable schedule_many (normal) vs raw sqlite3",
            "durable.normal",
            durable.many_name("normal"),
            0.4,
            0.6,
        ),
        Target(
            f"{cfg.dur_gather_n:,} concurrent awaited schedule with fsync vs raw batch inserts",
            "durable.full",
            durable.gather_name(cfg, "full"),
            0.15,
            0.3,
        ),
    ]
    for n in cfg.rec_sizes:
        ts.append(
            Target(
                f"recovery with {n:,} timers vs raw read-and-decode",
                f"recovery.{n}",
                recovery.ENGINE,
                0.5,
                0.7,
            )
        )
    ts += [
        Target("lateness p99 no worse than asyncio's", "lateness", lateness.ENGINE, 1.0),
        Target("zero early fires", "lateness", lateness.ENGINE, 0.0, kind="max", metric="early"),
        Target("memory per timer at or below asyncio's", "memory", memory.ENGINE, 1.0),
    ]
    return ts


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

    import importlib

    from bench.compare import runner
    from bench.compare.config import Config

    log = runner.Log(sys.stderr, verbose=not args.quiet)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="wheel-engine-bench-"))
    cfg = Config.make(args.quick, scratch, log)
    if args.rounds is not None:
        cfg.set_rounds(args.rounds)
    machine = runner.machine_info()
    command = "wheel-engine bench" + (" " + " ".join(argv) if argv else "")
    if argv is None and len(sys.argv) > 1:
        command = "wheel-engine bench " + " ".join(
            sys.argv[2:] if "bench" in sys.argv[1:2] else sys.argv[1:]
        )
    log(
        f"{'quick' if cfg.quick else 'full'} run of {', '.join(figures)}; "
        f"{machine['nproc']} CPUs ({machine['cpu']}), Python {machine['python']}"
    )

    comparisons: list[runner.Comparison] = []
    series: dict[str, Any] = {}
    failed = False
    t0 = time.perf_counter()
    try:
        for name in figures:
            num, module = FIGURES[name]
            log(f"figure {num}: {name}")
            mod = importlib.import_module(f"bench.compare.{module}")
            run: Callable[[Any, dict[str, Any]], list[runner.Comparison]] = mod.run
            try:
                comparisons.extend(run(cfg, series))
            except Exception:
                failed = True
                print(f"figure {num} ({name}) failed:", file=sys.stderr)
                traceback.print_exc()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    elapsed = time.perf_counter() - t0

    by_key = {c.key: c for c in comparisons}
    targets = runner.evaluate_targets(
        [t for t in _targets(cfg) if t.comparison.split(".")[0] in figures], by_key
    )

    print()
    print(
        f"wheel-engine bench ({'quick' if cfg.quick else 'full'}): {machine['nproc']} CPUs, "
        f"{machine['cpu']}, Python {machine['python']}, SQLite {machine['sqlite']}, "
        f"{elapsed:.0f} s"
    )
    print("Ratios are per interleaved round against the anchor (higher is better), median and")
    print("min-max spread over rounds; this machine is shared, expect +-30% on absolute figures.")
    for comp in comparisons:
        if comp.params.get("sweep"):
            continue
        print()
        print(runner.format_comparison(comp))
        if comp.key == "inmemory.e2e" and runner.format_sweep(series):
            print()
            print(runner.format_sweep(series))
    print()
    print(runner.format_targets(targets))

    runner.write_json(
        out / "results.json",
        machine=machine,
        command=command,
        comparisons=comparisons,
        targets=targets,
        series=series,
        elapsed=elapsed,
    )
    (out / "results.md").write_text(
        runner.format_markdown(comparisons, targets, machine, command, elapsed, series),
        encoding="utf-8",
    )
    written = [out / "results.json", out / "results.md"]
    if not args.no_plots:
        from bench.compare import plots

        why = plots.matplotlib_missing()
        if why:
            print(f"plots: skipped: {why}")
        else:
            subtitle = f"{machine['nproc']} CPUs, {machine['cpu']}, Python {machine['python']}"
            try:
                written += plots.draw(series, out, subtitle)
            except Exception:
                failed = True
                print("plots failed:", file=sys.stderr)
                traceback.print_exc()
    if args.docs:
        try:
            written += update_docs(Path(args.docs), out / "results.md", written)
        except (OSError, ValueError) as exc:
            failed = True
            print(f"--docs: {exc}", file=sys.stderr)
    print()
    print("wrote " + ", ".join(str(p) for p in written))
    if failed:
        return 1
    if args.strict and any(r.error for c in comparisons for r in c.results):
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
