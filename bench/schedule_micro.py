"""The schedule paths side by side: microseconds per timer, median of ``--rounds`` rounds.

Run it on two trees alternately to compare them (pure build: no compiled module is imported
from a tree that has none)::

    PYTHONPATH=<tree> /work/main/.venv/bin/python bench/schedule_micro.py --rounds 5

Each round starts a fresh engine (not timed) and times one workload of ``--timers`` timers,
every one due an hour ahead, so nothing fires; the workloads take turns within a round, so a
slow spell of the machine falls on all of them. SQLite journals are written with
``durability="normal"`` (no fsync per commit) into a temporary directory. ``--clock cpu`` times
the process's CPU (every thread's: the journal's writer too) instead of the wall clock, for a
machine other work shares: it leaves out the time spent waiting for a core. For instruction
counts, run one workload once under callgrind, with ``--timers 20000`` and with ``--timers 0``
(the engine, the interpreter and the imports alone), and divide the difference by 20,000::

    PYTHONPATH=<tree> valgrind --tool=callgrind /work/main/.venv/bin/python
        bench/schedule_micro.py --rounds 1 --only "memory one by one" --timers 20000

(one command, on one line).

- ``memory one by one``: ``await engine.schedule(...)`` each, one after the other, no key;
- ``memory replace``: the same, with a key that names a pending timer (the general path);
- ``memory many``: one ``schedule_many`` of every timer (bare requests);
- ``memory many keyed``: one ``schedule_many``, each request with a key (the checker's pass);
- ``sqlite concurrent``: every ``schedule()`` awaited under one ``asyncio.gather``;
- ``sqlite one by one``: a tenth of the timers, each awaited before the next (a commit each);
- ``sqlite many``: one ``schedule_many`` of every timer.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from wheel_engine import Engine

H = "bench"
Work = Callable[[Engine, int], Awaitable[None]]
Clock = Callable[[], float]


async def _one_by_one(engine: Engine, n: int) -> None:
    for _ in range(n):
        await engine.schedule(H, delay=3600.0)


async def _replace(engine: Engine, n: int) -> None:
    keys = [f"k{i % 100}" for i in range(n)]
    for key in keys:
        await engine.schedule(H, delay=3600.0, key=key)


async def _many(engine: Engine, n: int) -> None:
    await engine.schedule_many([{"handler": H, "delay": 3600.0} for _ in range(n)])


async def _many_keyed(engine: Engine, n: int) -> None:
    await engine.schedule_many([{"handler": H, "delay": 3600.0, "key": f"k{i}"} for i in range(n)])


async def _concurrent(engine: Engine, n: int) -> None:
    await asyncio.gather(*[engine.schedule(H, delay=3600.0) for _ in range(n)])


async def _sequential_tenth(engine: Engine, n: int) -> None:
    await _one_by_one(engine, n // 10)


#: name -> (durable, work, timers it schedules out of n)
WORKLOADS: dict[str, tuple[bool, Work, Callable[[int], int]]] = {
    "memory one by one": (False, _one_by_one, lambda n: n),
    "memory replace": (False, _replace, lambda n: n),
    "memory many": (False, _many, lambda n: n),
    "memory many keyed": (False, _many_keyed, lambda n: n),
    "sqlite concurrent": (True, _concurrent, lambda n: n),
    "sqlite one by one": (True, _sequential_tenth, lambda n: n // 10),
    "sqlite many": (True, _many, lambda n: n),
}


async def _round(name: str, n: int, directory: Path, serial: int, clock: Clock) -> float:
    """One timed run of workload ``name`` on a fresh engine: microseconds per timer."""
    durable, work, count = WORKLOADS[name]
    path = directory / f"micro-{serial}.db" if durable else None
    engine = Engine(path, durability="normal", compact_min_records=10 * n)
    engine.register(H, lambda firing: None)
    await engine.start()
    try:
        gc.collect()
        started = clock()
        await work(engine, n)
        elapsed = clock() - started
    finally:
        await engine.close()
    return elapsed / max(count(n), 1) * 1e6  # --timers 0: an engine's cost alone


async def _main(rounds: int, n: int, only: list[str], clock: Clock) -> dict[str, list[float]]:
    results: dict[str, list[float]] = {name: [] for name in only}
    with tempfile.TemporaryDirectory() as tmp:
        serial = 0
        for _ in range(rounds):
            for name in only:
                serial += 1
                results[name].append(await _round(name, n, Path(tmp), serial, clock))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--timers", type=int, default=20_000)
    parser.add_argument("--only", action="append", choices=sorted(WORKLOADS))
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    args = parser.parse_args()
    only = args.only or list(WORKLOADS)
    clock = time.perf_counter if args.clock == "wall" else time.process_time
    results = asyncio.run(_main(args.rounds, args.timers, only, clock))
    import wheel_engine

    print(f"# {wheel_engine.__file__}: {args.timers} timers, {args.rounds} rounds, {args.clock}")
    for name, figures in results.items():
        print(f"{name:20s} {statistics.median(figures):8.3f} us/timer (min {min(figures):.3f})")


if __name__ == "__main__":
    main()
