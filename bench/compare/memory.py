"""Figure 3: memory per pending timer.

Measured as the RSS delta (``/proc/self/statm``) of a fresh Python process, before and after
N timers due an hour from now are made pending (after a full GC both times), divided by N.
Each contender runs in its own subprocess so no figure inherits another's heap. It counts
everything the timer keeps alive plus allocator slack. Where ``/proc`` is missing it falls back
to ``tracemalloc`` (Python heap only), and the table says which was used.

- wheel-engine: ``Engine(None)``, ``schedule_many`` in batches of 1,000, keys made by the engine
  (each timer has one: it is how ``cancel``/``get`` find it), no payload.
- asyncio: ``loop.call_at(when, callback)``, handles kept only by the loop's heap (the anchor).
- asyncio + a dict of handles by key: what a user needs to cancel by key, for comparison.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import subprocess
import sys
import time
import tracemalloc
from typing import Any

from bench.compare import peers
from bench.compare.config import Config
from bench.compare.inmemory import BATCH
from bench.compare.measure import Comparison, Contender, Figure, Measure, Metrics
from bench.compare.subject import HANDLER, engine_missing, new_engine, register

#: The figure this module draws: what its comparisons measure.
FIGURE = Figure("3", Measure("bytes_per_timer", "B/timer", higher_is_better=False), ("total_mb",))

STATM = "/proc/self/statm"
METHOD = "rss" if os.path.exists(STATM) else "tracemalloc"


def _rss() -> int:
    with open(STATM, encoding="ascii") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _begin() -> int:
    gc.collect()
    if METHOD == "rss":
        return _rss()
    tracemalloc.start()
    return tracemalloc.get_traced_memory()[0]


def _end(before: int, n: int, t0: float) -> Metrics:
    gc.collect()
    if METHOD == "rss":
        after = _rss()
    else:
        after = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
    return {
        "bytes_per_timer": (after - before) / n,
        "total_mb": (after - before) / 1e6,
        "seconds": time.perf_counter() - t0,
    }


def child(kind: str, n: int) -> None:
    """Entry point of the measuring subprocess: prints one JSON line of metrics."""
    if kind == "engine":
        m = engine_memory(n)
    elif kind == "asyncio+dict":
        m = loop_memory("asyncio", n, True)
    else:
        m = loop_memory(kind, n, False)
    print(json.dumps(m))


def in_subprocess(kind: str, n: int) -> Metrics:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    proc = subprocess.run(
        [sys.executable, "-c", f"from bench.compare.memory import child; child({kind!r}, {n})"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["?"])[-1]
        raise RuntimeError(f"measuring subprocess failed: {tail}")
    result: Metrics = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


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
WHAT = {
    "rss": "RSS delta of a fresh process, after gc",
    "tracemalloc": "tracemalloc, Python heap after gc; not RSS",
}


def run(cfg: Config, series: dict[str, Any]) -> list[Comparison]:
    n = cfg.mem_n
    eng = engine_missing(False)
    uv = peers.uvloop_missing()
    cs = [
        Contender(ENGINE, lambda: in_subprocess("engine", n), skip=eng),
        Contender(ASYNCIO, lambda: in_subprocess("asyncio", n)),
        Contender("asyncio TimerHandle + dict by key", lambda: in_subprocess("asyncio+dict", n)),
        Contender("uvloop TimerHandle", lambda: in_subprocess("uvloop", n), skip=uv),
    ]
    return [
        FIGURE.compare(
            cfg,
            key="memory",
            title=f"memory per pending timer at {n:,} ({WHAT[METHOD]})",
            contenders=cs,
            anchor=ASYNCIO,
            reps=cfg.mem_reps,
            params={"n": n, "method": METHOD},
        )
    ]
