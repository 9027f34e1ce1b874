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
"""

from __future__ import annotations

import asyncio
import gc
import sys
import tempfile
import time
from pathlib import Path

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


async def floor_calls(n: int) -> float:
    """asyncio alone: ``n`` gathered coroutines each awaiting its future, resolved at once."""
    loop = asyncio.get_running_loop()
    futures: list[asyncio.Future[None]] = []

    async def one() -> None:
        future: asyncio.Future[None] = loop.create_future()
        futures.append(future)
        await future

    async def resolve() -> None:
        await asyncio.sleep(0)  # every call waits by now
        for future in futures:
            future.set_result(None)

    start = time.perf_counter()
    resolver = asyncio.ensure_future(resolve())
    await asyncio.gather(*(one() for _ in range(n)))
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


def main(argv: list[str]) -> int:
    if argv[:1] == ["rates"]:
        rates()
    elif len(argv) == 2 and argv[0] in ("engine", "floor"):
        n = int(argv[1])
        if argv[0] == "floor":
            asyncio.run(floor_calls(n))
        else:
            with tempfile.TemporaryDirectory(prefix="wheel-engine-floor-") as where:
                asyncio.run(engine_calls(Path(where) / "calls.db", n))
    else:
        print("usage: python -m bench.compare.concurrent_floor rates | engine N | floor N")
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
