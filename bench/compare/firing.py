"""Figure 5: firing durable timers that are due.

- wheel-engine (durability full and normal): N timers are scheduled with ``schedule_many`` all
  due at the same instant, far enough ahead for scheduling to finish; the figure is the time
  from that instant until the handler (a plain function) has run for every timer, and until
  ``stats()["succeeded"]`` reaches N (every attempt and ack committed).
- APScheduler 3: N date jobs already due sit in its SQLAlchemy SQLite store, the scheduler is
  paused; the figure is the time from ``resume()`` until every job ran (10 worker threads;
  APScheduler deletes each fired date job, one transaction each).
- huey: N tasks scheduled with an eta already past sit in ``SqliteHuey``; the figure is the
  time from starting an in-process consumer (``huey.create_consumer(workers=4,
  worker_type="thread").start()``, in the same process as its store) until every task ran.

APScheduler and huey each run in a child process of their own (:mod:`bench.compare.isolated`:
their libraries would otherwise stay in the bench's heap for every later round).
"""

from __future__ import annotations

import asyncio
import functools
import time
from pathlib import Path
from typing import Any

from bench.compare import isolated, peers
from bench.compare.config import Config
from bench.compare.durable import fresh_db
from bench.compare.inmemory import BATCH
from bench.compare.measure import RATE, Comparison, Contender, Figure, Metrics
from bench.compare.subject import HANDLER, engine_missing, new_engine, register

#: The figure this module draws: what its comparisons measure.
FIGURE = Figure("5", RATE, ("n", "acked_seconds"))


def engine_fire(path: Path, n: int, durability: str, timeout: float) -> Metrics:
    async def main() -> Metrics:
        fired = peers.Countdown(n, time.time)
        engine = new_engine(path, durability=durability)
        register(engine, fired.tick)
        async with engine:
            lead = 0.3 + n * 50e-6
            due = time.time() + lead
            for start in range(0, n, BATCH):
                await engine.schedule_many(
                    [{"handler": HANDLER, "at": due} for _ in range(start, min(n, start + BATCH))]
                )
            late_start = time.time() > due
            try:
                end = await asyncio.wait_for(fired.done, timeout + lead)
            except TimeoutError:
                raise TimeoutError(f"engine fired {fired.count} of {n}") from None
            deadline = time.time() + timeout
            while engine.stats().get("succeeded", n) < n:
                if time.time() > deadline:
                    raise TimeoutError(f"only {engine.stats().get('succeeded')} of {n} acked")
                await asyncio.sleep(0.005)
            acked = time.time()
        el = end - due
        return {
            "rate": n / el,
            "seconds": el,
            "acked_seconds": acked - due,
            "scheduling_overran": late_start,
            "n": n,
        }

    try:
        return peers.run_on("asyncio", main)
    finally:
        peers.remove_db(path)


def _in_scratch(cfg: Config, name: str, fn: Any, *args: Any) -> Metrics:
    p = fresh_db(cfg, name)
    try:
        result: Metrics = fn(p, *args)
        return result
    finally:
        peers.remove_db(p)


def _child(adapter: str) -> Any:
    """``isolated.in_child(adapter, path, ...)`` as a function of the path and the rest."""
    return functools.partial(isolated.in_child, adapter)


APS = "APScheduler 3 (10 threads)"
HUEY = "huey consumer (4 threads)"


def run(cfg: Config, series: dict[str, Any]) -> list[Comparison]:
    eng = engine_missing(True)
    aps = peers.apscheduler_missing()
    hu = peers.huey_missing()
    timeout = 60.0
    cs = [
        Contender(
            "wheel-engine (full)",
            lambda: _in_scratch(cfg, "fire-full", engine_fire, cfg.fire_n, "full", timeout),
            skip=eng,
        ),
        Contender(
            "wheel-engine (normal)",
            lambda: _in_scratch(cfg, "fire-normal", engine_fire, cfg.fire_n, "normal", timeout),
            skip=eng,
        ),
        Contender(
            APS,
            lambda: _in_scratch(cfg, "fire-aps", _child("aps_fire"), cfg.fire_aps_n, timeout),
            skip=aps,
        ),
        Contender(
            HUEY,
            lambda: _in_scratch(cfg, "fire-huey", _child("huey_fire"), cfg.fire_huey_n, timeout),
            skip=hu,
        ),
    ]
    anchor = APS if not aps else HUEY if not hu else "wheel-engine (full)"
    return [
        FIGURE.compare(
            cfg,
            key="firing",
            title="firing durable timers that are due (time from due until all handlers ran)",
            contenders=cs,
            anchor=anchor,
            reps=cfg.fire_reps,
            params={
                "n_engine": cfg.fire_n,
                "n_apscheduler": cfg.fire_aps_n,
                "n_huey": cfg.fire_huey_n,
            },
        )
    ]
