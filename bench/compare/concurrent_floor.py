"""What limits figure 4's concurrent ``schedule()``: asyncio's own floor, measured beside it.

``python -m bench.compare.concurrent_floor rates`` runs, three times in one process, the raw
sqlite3 anchor of figure 4, asyncio alone (a ``gather`` of 20,000 coroutines, each awaiting a
future that one task resolves: the task and the future an awaited call needs, with no engine)
and the engine's 20,000 concurrent ``schedule()`` calls, and prints each rate and its ratio to
raw. ``... engine N`` and ``... floor N`` run one of the two with N calls and nothing else, for
an instruction count per call that repeats on a loaded machine::

    valgrind --tool=callgrind python -m bench.compare.concurrent_floor engine 20000
    valgrind --tool=callgrind python -m bench.compare.concurrent_floor engine 0

(the difference of the two totals, divided by 20,000; ``docs/benchmarks.md`` quotes both).

``... heap`` runs asyncio alone and the engine again with 0, 50,000 and 200,000 other
GC-tracked objects alive in the process (a service's modules and state), and prints the time
the burst spent in full collections: each walks the whole heap, and a burst this size runs
two of them, with or without the engine (:mod:`bench.compare.isolated` says why the bench keeps
its peers' libraries out of its own process for that reason).
"""

from __future__ import annotations

import asyncio
import gc
import sys
import tempfile
import time
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any

from bench.compare import peers
from wheel_engine import Engine

HANDLER = "bench"


async def engine_calls(path: Path, n: int) -> float:
    """``n`` concurrent awaited ``schedule()`` calls at full durability: calls per second."""
    engine = Engine(path, tick=0.001)
    engine.register(HANDLER, lambda firing: None)
    async with engine:
        base = time.time() + 3600.0
        start = time.perf_counter()
        await asyncio.gather(*(engine.schedule(HANDLER, at=base + i * 1e-3) for i in range(n)))
        return n / max(time.perf_counter() - start, 1e-9)


class FloorCalls:
    """asyncio alone, what an awaited call needs with no engine: :meth:`calls` makes ``n``
    coroutines that each await a future of their own, and :meth:`resolve` (run as a task)
    resolves them all once they all wait, then records when (``resolved_at``)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.futures: list[asyncio.Future[None]] = []
        self.resolved_at = 0.0

    def calls(self) -> Iterator[Coroutine[Any, Any, None]]:
        return (self._one() for _ in range(self.n))

    async def _one(self) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.futures.append(future)
        await future

    async def resolve(self) -> None:
        await asyncio.sleep(0)  # every call waits by now
        for future in self.futures:
            future.set_result(None)
        self.resolved_at = time.perf_counter()


async def floor_calls(n: int) -> float:
    """asyncio alone: ``n`` gathered coroutines each awaiting its future, resolved at once."""
    floor = FloorCalls(n)
    start = time.perf_counter()
    resolver = asyncio.ensure_future(floor.resolve())
    await asyncio.gather(*floor.calls())
    await resolver
    return n / max(time.perf_counter() - start, 1e-9)


def rates(n: int = 20_000, rounds: int = 3) -> None:
    with tempfile.TemporaryDirectory(prefix="wheel-engine-floor-") as where:
        scratch = Path(where)
        for r in range(rounds):
            gc.collect()
            raw = peers.raw_insert(scratch / f"raw-{r}.db", 100_000, "full")["rate"]
            gc.collect()
            floor = asyncio.run(floor_calls(n))
            gc.collect()
            engine = asyncio.run(engine_calls(scratch / f"engine-{r}.db", n))
            print(
                f"raw {raw:,.0f}/s  asyncio alone {floor:,.0f}/s ({floor / raw:.3f}x)  "
                f"engine {engine:,.0f}/s ({engine / raw:.3f}x)"
            )


class Collections:
    """Every collection run while it is entered, as (generation, start, end) in
    ``perf_counter`` seconds (``gc.callbacks``); :meth:`full` counts and times the full ones."""

    def __init__(self) -> None:
        self.runs: list[tuple[int, float, float]] = []
        self._started = 0.0

    def __enter__(self) -> Collections:
        gc.callbacks.append(self._observe)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._observe)

    def _observe(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.runs.append((info["generation"], self._started, time.perf_counter()))

    def full(self) -> tuple[int, float]:
        """How many full collections ran, and the seconds they took."""
        full = [end - start for generation, start, end in self.runs if generation == 2]
        return len(full), sum(full)


def heap(n: int = 20_000, sizes: tuple[int, ...] = (0, 50_000, 200_000)) -> None:
    """Each workload with ``size`` more tracked objects alive: empty lists, the cheapest to walk
    (the 37,000 objects of APScheduler and huey cost a burst about what 300,000 of these do)."""
    with tempfile.TemporaryDirectory(prefix="wheel-engine-floor-") as where:
        for size in sizes:
            ballast: list[list[None]] = [[] for _ in range(size)]
            gc.collect()
            raw = peers.raw_insert(Path(where) / f"raw-{size}.db", 100_000, "full")["rate"]
            floor, floor_full = _observed(floor_calls(n))
            engine, engine_full = _observed(engine_calls(Path(where) / f"engine-{size}.db", n))
            print(
                f"{size:>7,} more objects: raw {raw:,.0f}/s  "
                f"asyncio alone {floor / raw:.3f}x ({floor_full})  "
                f"engine {engine / raw:.3f}x ({engine_full})"
            )
            del ballast


def _observed(calls: Coroutine[Any, Any, float]) -> tuple[float, str]:
    """The rate ``calls`` reports, and what the full collections during it cost."""
    gc.collect()
    with Collections() as seen:
        rate = asyncio.run(calls)
    count, seconds = seen.full()
    return rate, f"{count} full collections, {seconds * 1e3:.0f} ms"


def main(argv: list[str]) -> int:
    if argv[:1] == ["rates"]:
        rates()
    elif argv[:1] == ["heap"]:
        heap()
    elif len(argv) == 2 and argv[0] in ("engine", "floor"):
        n = int(argv[1])
        if argv[0] == "floor":
            asyncio.run(floor_calls(n))
        else:
            with tempfile.TemporaryDirectory(prefix="wheel-engine-floor-") as where:
                asyncio.run(engine_calls(Path(where) / "calls.db", n))
    else:
        print("usage: python -m bench.compare.concurrent_floor rates | heap | engine N | floor N")
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
