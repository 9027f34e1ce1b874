"""Figure 3: memory per pending timer.

Measured as the RSS delta (``/proc/self/statm``) of a fresh Python process, before and after
N timers due an hour from now are made pending (after a full GC both times), divided by N.
Each contender runs in its own subprocess so no figure inherits another's heap. It counts
everything the timer keeps alive plus allocator slack. Where ``/proc`` is missing it falls back
to ``tracemalloc`` (Python heap only), and the table says which was used.

- wheel-engine: ``Engine(None)``, ``schedule_many`` in batches of 1,000, keys made by the engine
  (each timer has one: it is how ``cancel``/``get`` find it), no payload.
- wheel-engine, user keys: the same with keys like ``order:12345678`` (:func:`user_key`).
- asyncio: ``loop.call_at(when, callback)``, handles kept only by the loop's heap (the anchor).
- asyncio + a dict of handles by key: what a user needs to cancel by key, for comparison (the
  same keys as the row above: the user-key row's own anchor).

``bench.memory_micro`` runs the same subprocesses with ``tracemalloc`` and lists where the
bytes are allocated.
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


def user_key(i: int) -> str:
    """The ``i``-th user key of the user-key rows: ``order:`` and eight digits."""
    return f"order:{i:08d}"


def _begin(method: str, sites: int) -> Any:
    """What :func:`_end` subtracts: the RSS, or the traced heap (and a snapshot for ``sites``)."""
    gc.collect()
    if method == "rss":
        return _rss()
    tracemalloc.start()
    return tracemalloc.get_traced_memory()[0], tracemalloc.take_snapshot() if sites else None


def _end(before: Any, n: int, t0: float, method: str, sites: int) -> Metrics:
    """The growth since :func:`_begin`, per timer; with ``sites``, the largest allocation sites
    (``file:line``, bytes per timer) of the traced heap."""
    gc.collect()
    top: list[tuple[str, float]] = []
    if method == "rss":
        grown = _rss() - before
    else:
        base, snapshot = before
        grown = tracemalloc.get_traced_memory()[0] - base
        if snapshot is not None:
            for stat in tracemalloc.take_snapshot().compare_to(snapshot, "lineno")[:sites]:
                frame = stat.traceback[0]
                top.append((f"{frame.filename}:{frame.lineno}", stat.size_diff / n))
        tracemalloc.stop()
    metrics: Metrics = {
        "bytes_per_timer": grown / n,
        "total_mb": grown / 1e6,
        "seconds": time.perf_counter() - t0,
    }
    if sites:
        metrics["sites"] = top
    return metrics


#: The subprocesses' kinds: what :func:`child` measures.
KINDS = ("engine", "engine+keys", "asyncio", "asyncio+dict", "uvloop")


def child(kind: str, n: int, method: str = METHOD, sites: int = 0) -> None:
    """Entry point of the measuring subprocess: prints one JSON line of metrics."""
    if kind.startswith("engine"):
        m = engine_memory(n, kind == "engine+keys", method, sites)
    elif kind == "asyncio+dict":
        m = loop_memory("asyncio", n, True, method, sites)
    else:
        m = loop_memory(kind, n, False, method, sites)
    print(json.dumps(m))


def in_subprocess(kind: str, n: int, method: str = METHOD, sites: int = 0) -> Metrics:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    code = f"from bench.compare.memory import child; child({kind!r}, {n}, {method!r}, {sites})"
    proc = subprocess.run(
        [sys.executable, "-c", code],
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


def loop_memory(loop_kind: str, n: int, with_keys: bool, method: str, sites: int) -> Metrics:
    async def main() -> Metrics:
        loop = asyncio.get_running_loop()

        def cb() -> None:
            pass

        handles: dict[str, asyncio.TimerHandle] = {}
        t0 = time.perf_counter()
        before = _begin(method, sites)
        base = loop.time() + 3600.0
        call_at = loop.call_at
        if with_keys:
            for i in range(n):
                handles[user_key(i)] = call_at(base + i * 1e-4, cb)
        else:
            for i in range(n):
                call_at(base + i * 1e-4, cb)
        m = _end(before, n, t0, method, sites)
        for h in handles.values():
            h.cancel()
        return m

    return peers.run_on(loop_kind, main)


def engine_memory(n: int, user_keys: bool, method: str, sites: int) -> Metrics:
    async def main() -> Metrics:
        def h(firing: Any) -> None:
            pass

        engine = new_engine(None, tick=0.001)
        register(engine, h)
        async with engine:
            t0 = time.perf_counter()
            before = _begin(method, sites)
            base = time.time() + 3600.0
            for start in range(0, n, BATCH):
                batch: list[dict[str, Any]] = [
                    {"handler": HANDLER, "at": base + i * 1e-4}
                    for i in range(start, min(n, start + BATCH))
                ]
                if user_keys:
                    for i, request in enumerate(batch, start):
                        request["key"] = user_key(i)
                await engine.schedule_many(batch)
            del batch  # the last batch's requests are not the engine's
            m = _end(before, n, t0, method, sites)
            pending = engine.stats().get("pending")
            if pending is not None and pending != n:
                raise AssertionError(f"engine reports {pending} pending, expected {n}")
            return m

    return peers.run_on("asyncio", main)


ENGINE = "wheel-engine"
ENGINE_USER_KEYS = "wheel-engine, user keys"
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
        Contender(ENGINE_USER_KEYS, lambda: in_subprocess("engine+keys", n), skip=eng),
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
