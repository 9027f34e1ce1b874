"""Figure 3: memory per pending timer.

Measured with ``tracemalloc``: the Python heap allocated (and still held, after a full GC)
while N timers due an hour from now are pending, divided by N. This counts every object the
timer keeps alive (handles, keys, wheel slots, dict entries, list over-allocation), but not
allocator slack or memory a C library takes from ``malloc`` directly; it is not RSS.

- wheel-engine: ``Engine(None)``, ``schedule_many`` in batches of 1,000, keys made by the engine
  (each timer has one: it is how ``cancel``/``get`` find it), no payload.
- asyncio: ``loop.call_at(when, callback)``, handles kept only by the loop's heap (the anchor).
- asyncio + a dict of handles by key: what a user needs to cancel by key, for comparison.
"""

from __future__ import annotations

import asyncio
import gc
import time
import tracemalloc
from typing import Any

from bench.compare import peers
from bench.compare.config import Config
from bench.compare.inmemory import BATCH
from bench.compare.runner import Comparison, Contender, Metrics, run_comparison
from bench.compare.subject import HANDLER, engine_missing, new_engine, register


def _begin() -> int:
    gc.collect()
    tracemalloc.start()
    return tracemalloc.get_traced_memory()[0]


def _end(before: int, n: int, t0: float) -> Metrics:
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return {
        "bytes_per_timer": (after - before) / n,
        "total_mb": (after - before) / 1e6,
        "seconds": time.perf_counter() - t0,
    }


def loop_memory(loop_kind: str, n: int, with_keys: bool) -> Metrics:
    async def main() -> Metrics:
        loop = asyncio.get_running_loop()

        def cb() -> None:
            pass

        handles: dict[str, asyncio.TimerHandle] = {}
        t0 = time.perf_counter()
        before = _begin()
        base = loop.time() + 3600.0
        call_at = loop.call_at
        if with_keys:
            for i in range(n):
                handles[f"k{i}"] = call_at(base + i * 1e-4, cb)
        else:
            for i in range(n):
                call_at(base + i * 1e-4, cb)
        m = _end(before, n, t0)
        for h in handles.values():
            h.cancel()
        return m

    return peers.run_on(loop_kind, main)


def engine_memory(n: int) -> Metrics:
    async def main() -> Metrics:
        def h(firing: Any) -> None:
            pass

        engine = new_engine(None, tick=0.001)
        register(engine, h)
        async with engine:
            t0 = time.perf_counter()
            before = _begin()
            base = time.time() + 3600.0
            for start in range(0, n, BATCH):
                await engine.schedule_many(
                    [
                        {"handler": HANDLER, "at": base + i * 1e-4}
                        for i in range(start, min(n, start + BATCH))
                    ]
                )
            m = _end(before, n, t0)
            pending = engine.stats().get("pending")
            if pending is not None and pending != n:
                raise AssertionError(f"engine reports {pending} pending, expected {n}")
            return m

    return peers.run_on("asyncio", main)


ENGINE = "wheel-engine"
ASYNCIO = "asyncio TimerHandle"


def run(cfg: Config, series: dict[str, Any]) -> list[Comparison]:
    n = cfg.mem_n
    eng = engine_missing(False)
    uv = peers.uvloop_missing()
    cs = [
        Contender(ENGINE, lambda: engine_memory(n), skip=eng),
        Contender(ASYNCIO, lambda: loop_memory("asyncio", n, False)),
        Contender("asyncio TimerHandle + dict by key", lambda: loop_memory("asyncio", n, True)),
        Contender(
            "uvloop TimerHandle",
            lambda: loop_memory("uvloop", n, False),
            skip=uv,
            note="libuv's uv_timer_t is allocated through PyMem_RawMalloc, which tracemalloc sees",
        ),
    ]
    return [
        run_comparison(
            key="memory",
            figure="3",
            title=f"memory per pending timer at {n:,} (tracemalloc, after gc; not RSS)",
            contenders=cs,
            anchor=ASYNCIO,
            metric="bytes_per_timer",
            unit="B/timer",
            higher_is_better=False,
            reps=cfg.mem_reps,
            log=cfg.log,
            params={"n": n, "method": "tracemalloc"},
            extra_metrics=["total_mb"],
        )
    ]
