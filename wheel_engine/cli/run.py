"""The commands that run something: ``demo`` and ``bench``."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from wheel_engine.cli.output import EXIT_ERROR, CliError, Output

__all__ = ["cmd_bench", "cmd_demo", "load_bench"]


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


def load_bench(roots: list[Path] | None = None) -> Callable[[list[str]], Any]:
    """``bench.compare.main``, found on ``sys.path`` or in the repository this package sits in.

    The benchmarks are not part of the installed distribution (they need the peers they compare
    against), so an installed ``wheel-engine`` only finds them next to a checkout.
    """
    try:
        module = importlib.import_module("bench.compare")
    except ImportError as first:
        if first.name not in ("bench", "bench.compare"):
            raise CliError(
                f"the benchmarks need a package that is not installed ({first}); "
                "install them with: pip install -e '.[bench]'",
                code=EXIT_ERROR,
            ) from first
        if roots is None:
            roots = [Path.cwd(), Path(__file__).resolve().parents[2]]
        for root in roots:
            compare = root / "bench" / "compare"
            if compare.with_suffix(".py").is_file() or (compare / "__init__.py").is_file():
                sys.path.insert(0, str(root))
                try:
                    module = importlib.import_module("bench.compare")
                except ImportError as exc:
                    raise CliError(
                        f"cannot import the benchmarks from {root / 'bench'} ({exc}); "
                        "install them with: pip install -e '.[bench]'",
                        code=EXIT_ERROR,
                    ) from exc
                break
        else:
            raise CliError(
                "the benchmarks are not installed with wheel-engine: run `wheel-engine bench` "
                "from a clone of the repository (git clone ...; pip install -e '.[bench]')",
                code=EXIT_ERROR,
            ) from first
    main = getattr(module, "main", None)
    if not callable(main):
        raise CliError("bench.compare has no main(argv) function", code=EXIT_ERROR)
    return main  # type: ignore[no-any-return]


def cmd_bench(args: argparse.Namespace, out: Output) -> int:
    main = load_bench()
    try:
        result = main(list(args.bench_args))
    except SystemExit as exc:  # argparse inside the benchmark: --help, usage errors
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return int(result) if isinstance(result, int) else 0
