"""Bytes per pending timer on the Python heap (``tracemalloc``), and where they are allocated.

Run it from inside a tree, on two trees alternately to compare them (``-m`` puts the current
directory first, so that tree's ``wheel_engine`` is imported: pure where it has no compiled
module; the line it prints says which)::

    cd <tree> && /work/main/.venv/bin/python -m bench.memory_micro --timers 100000 1000000

The workloads are figure 3's (``bench.compare.memory``: one fresh subprocess each, N timers
due an hour from now made pending, the growth after a full GC divided by N), measured with
``tracemalloc`` instead of the RSS: the Python heap only, no allocator slack, and with
``--sites`` the largest allocation sites (``file:line``, bytes per timer), what a lever there
would save. The kinds: ``engine`` (keys made by the engine), ``engine+keys`` (user keys
``order:<8 digits>``), ``asyncio`` (``loop.call_at``, the handles kept by the loop alone) and
``asyncio+dict`` (each handle also in a dict by the same user keys: the anchor of
``engine+keys``).
"""

from __future__ import annotations

import argparse

from bench.compare.memory import KINDS, in_subprocess


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--timers", type=int, nargs="+", default=[100_000])
    kinds = [kind for kind in KINDS if kind != "uvloop"]
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=kinds)
    parser.add_argument("--sites", type=int, default=0, help="list the N largest sites")
    args = parser.parse_args()
    if any(kind.startswith("engine") for kind in args.kinds):
        import wheel_engine

        build = "compiled" if wheel_engine.COMPILED else "pure"
        print(f"wheel_engine {build}: {wheel_engine.__file__}")
    for n in args.timers:
        for kind in args.kinds:
            result = in_subprocess(kind, n, "tracemalloc", args.sites)
            print(f"{kind:13} n={n:>9,} {result['bytes_per_timer']:7.1f} B/timer")
            for site, size in result.get("sites", ()):
                print(f"    {size:7.1f}  {site}")


if __name__ == "__main__":
    main()
