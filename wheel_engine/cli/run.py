"""The commands that run something: ``demo`` and ``bench``.

The benchmarks are a plug-in: they need the peers they compare against (APScheduler, huey,
uvloop...), which the library must not depend on, so they ship as their own distribution,
``wheel-engine-bench`` (``bench/pyproject.toml``), and register their ``main(argv)`` in the entry
point group :data:`BENCH_GROUP`. ``wheel-engine bench`` finds them there, through the installed
distributions' metadata only: the library never imports ``bench`` by name and never edits
``sys.path``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from wheel_engine.cli.output import EXIT_OK, EXIT_PROBLEM, CliError, Output

__all__ = [
    "BENCH_DESCRIPTION",
    "BENCH_GROUP",
    "INSTALL_BENCH",
    "cmd_bench",
    "cmd_demo",
    "load_bench",
]

#: The entry point group a benchmark distribution registers its ``main(argv) -> int`` in.
BENCH_GROUP = "wheel_engine.bench"
#: The entry point's name in that group (the one taken when several are installed).
BENCH_NAME = "compare"
#: What to install for ``wheel-engine bench``, said in one line: from a checkout first, as
#: there is no release yet (the distribution's name, for when there is one, second).
INSTALL_BENCH = (
    "pip install ./bench from a checkout of wheel-engine (once released: "
    "pip install wheel-engine-bench)"
)
#: The ``bench`` command's description, also its help when the benchmarks are not installed.
BENCH_DESCRIPTION = (
    "Runs the side-by-side benchmark (wheel-engine against asyncio, uvloop, APScheduler, huey "
    "and raw sqlite3); every argument after `bench` is passed to it (e.g. `wheel-engine bench "
    "--quick`, `wheel-engine bench --help` for its options). The benchmark is a separate "
    f"distribution: {INSTALL_BENCH}."
)

BenchMain = Callable[[list[str]], Any]


def cmd_demo(args: argparse.Namespace, out: Output) -> int:
    from wheel_engine import demo

    return demo.run(
        orders=args.orders,
        quick=args.quick,
        seed=args.seed,
        workdir=args.dir,
        crash=not args.no_crash,
        json_mode=out.json_mode,
        console=out.console,
    )


def load_bench() -> BenchMain | None:
    """The installed benchmark's ``main(argv)``, or None when no distribution provides one.

    Raises :class:`CliError` (exit 1) when it is installed but cannot be imported, e.g. a peer
    it needs is missing.
    """
    found = _bench_entry_point()
    if found is None:
        return None
    try:
        main = found.load()
    except ImportError as exc:
        raise CliError(
            f"the benchmarks are installed but cannot be imported ({exc}); reinstall them: "
            f"{INSTALL_BENCH}",
            code=EXIT_PROBLEM,
        ) from exc
    if not callable(main):
        raise CliError(
            f"the benchmark entry point {found.value} is not callable", code=EXIT_PROBLEM
        )
    return main  # type: ignore[no-any-return]


def _bench_entry_point() -> EntryPoint | None:
    """The group's entry point named :data:`BENCH_NAME`, else its first one, else None."""
    candidates = list(entry_points(group=BENCH_GROUP))
    named = [ep for ep in candidates if ep.name == BENCH_NAME]
    chosen = named or candidates
    return chosen[0] if chosen else None


def cmd_bench(args: argparse.Namespace, out: Output) -> int:
    bench_args = list(args.bench_args)
    main = load_bench()
    if main is None:
        if "-h" in bench_args or "--help" in bench_args:
            out.line(f"usage: wheel-engine bench [ARGS ...]\n\n{BENCH_DESCRIPTION}")
            return EXIT_OK
        raise CliError(f"the benchmarks are not installed: {INSTALL_BENCH}", code=EXIT_PROBLEM)
    try:
        result = main(bench_args)
    except SystemExit as exc:  # argparse inside the benchmark: --help, usage errors
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return int(result) if isinstance(result, int) else 0
