"""Figure 1: in memory, schedule then fire N timers spread over a short window, end to end.

Every contender gets the same due offsets (uniform over ``window`` seconds, shuffled with a
fixed seed so the order is not the heap's best case) and the same clock: the real one. The
figure is the wall time from the first schedule call to the last firing; CPU time is recorded
too. The window is kept short so that for large N the cost, not the window, dominates.

- wheel-engine: ``Engine(None, tick=0.001)``, a plain (inline) handler, ``await
  engine.schedule(...)`` one by one, or ``await engine.schedule_many(...)`` in batches of 1,000.
- asyncio / uvloop: ``loop.call_at(loop.time() + offset, callback)``.

The cancel-heavy mix (the order-timeout case) schedules every timer with a key and cancels 90%
of them 100 schedules later (well before their due), so 10% fire.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from typing import Any

from bench.compare import peers
from bench.compare.config import Config
from bench.compare.measure import RATE, Comparison, Contender, Figure, Metrics
from bench.compare.subject import HANDLER, engine_missing, new_engine, register

#: The figure this module draws: what its comparisons measure.
FIGURE = Figure("1", RATE)

BATCH = 1000
CANCEL_LAG = 100  #: a timer is cancelled this many schedules after its own
CANCEL_LEAD = 0.05  #: seconds from the start to the first due in the cancel mix


def offsets(n: int, window: float, seed: int = 1) -> list[float]:
    offs = [window * i / n for i in range(n)]
    random.Random(seed).shuffle(offs)
    return offs


def _timeout(n: int, window: float) -> float:
    return window + 10.0 + n * 50e-6


def _result(n: int, t0: float, sched_end: float, end: float, c0: float) -> Metrics:
    el = end - t0
    return {
        "rate": n / el,
        "seconds": el,
        "schedule_seconds": sched_end - t0,
        "cpu_seconds": time.process_time() - c0,
    }


# ---------------------------------------------------------------------------------------------
# all timers fire


def loop_e2e(loop_kind: str, offs: list[float], window: float) -> Metrics:
    n = len(offs)

    async def main() -> Metrics:
        loop = asyncio.get_running_loop()
        fired = peers.Countdown(n, time.perf_counter)
        cb = fired.tick
        call_at = loop.call_at
        c0 = time.process_time()
        t0 = time.perf_counter()
        base = loop.time()
        for o in offs:
            call_at(base + o, cb)
        sched_end = time.perf_counter()
        end = await asyncio.wait_for(fired.done, _timeout(n, window))
        return _result(n, t0, sched_end, end, c0)

    return peers.run_on(loop_kind, main)


def engine_e2e(
    offs: list[float], window: float, many: bool, loop_kind: str = "asyncio", coro: bool = False
) -> Metrics:
    """``coro``: the handler is an ``async def`` that never awaits (the countdown's tick)."""
    n = len(offs)

    async def main() -> Metrics:
        fired = peers.Countdown(n, time.perf_counter)
        engine = new_engine(None, tick=0.001)
        tick = fired.tick

        async def on_fire(firing: object) -> None:
            tick(firing)

        register(engine, on_fire if coro else tick)
        async with engine:
            c0 = time.process_time()
            t0 = time.perf_counter()
            base = time.time()
            if many:
                schedule_many = engine.schedule_many
                for i in range(0, n, BATCH):
                    await schedule_many(
                        [{"handler": HANDLER, "at": base + o} for o in offs[i : i + BATCH]]
                    )
            else:
                schedule = engine.schedule
                for o in offs:
                    await schedule(HANDLER, at=base + o)
            sched_end = time.perf_counter()
            try:
                end = await asyncio.wait_for(fired.done, _timeout(n, window))
            except TimeoutError:
                raise TimeoutError(f"engine fired {fired.count} of {n} timers") from None
            return _result(n, t0, sched_end, end, c0)

    return peers.run_on(loop_kind, main)


# ---------------------------------------------------------------------------------------------
# cancel-heavy: 90% cancelled before due


def _survivors(n: int) -> int:
    return (n + 9) // 10


def loop_cancel_mix(loop_kind: str, offs: list[float], window: float) -> Metrics:
    n = len(offs)
    want = _survivors(n)

    async def main() -> Metrics:
        loop = asyncio.get_running_loop()
        survivors = peers.Countdown(want, time.perf_counter)
        survivor = survivors.tick
        leaked = 0

        def cancelled() -> None:
            nonlocal leaked
            leaked += 1

        handles: list[asyncio.TimerHandle | None] = [None] * n
        call_at = loop.call_at
        c0 = time.process_time()
        t0 = time.perf_counter()
        base = loop.time() + CANCEL_LEAD
        for i, o in enumerate(offs):
            handles[i] = call_at(base + o, cancelled if i % 10 else survivor)
            j = i - CANCEL_LAG
            if j >= 0 and j % 10:
                handles[j].cancel()  # type: ignore[union-attr]
                handles[j] = None
        for j in range(max(0, n - CANCEL_LAG), n):
            if j % 10:
                handles[j].cancel()  # type: ignore[union-attr]
        sched_end = time.perf_counter()
        end = await asyncio.wait_for(survivors.done, _timeout(n, window))
        m = _result(n, t0, sched_end, end, c0)
        m["cancelled_fired"] = leaked
        return m

    return peers.run_on(loop_kind, main)


def engine_cancel_mix(offs: list[float], window: float) -> Metrics:
    n = len(offs)
    want = _survivors(n)

    async def main() -> Metrics:
        from wheel_engine import CancelResult

        loop = asyncio.get_running_loop()
        done: asyncio.Future[float] = loop.create_future()
        count = 0
        leaked = 0

        def h(firing: Any) -> None:
            nonlocal count, leaked
            if int(firing.key[1:]) % 10:
                leaked += 1
                return
            count += 1
            if count == want:
                done.set_result(time.perf_counter())

        engine = new_engine(None, tick=0.001)
        register(engine, h)
        missed = 0
        async with engine:
            schedule, cancel = engine.schedule, engine.cancel
            canceled = CancelResult.CANCELED
            keys = [f"o{i}" for i in range(n)]
            c0 = time.process_time()
            t0 = time.perf_counter()
            base = time.time() + CANCEL_LEAD
            for i, o in enumerate(offs):
                await schedule(HANDLER, at=base + o, key=keys[i])
                j = i - CANCEL_LAG
                if j >= 0 and j % 10 and await cancel(keys[j]) is not canceled:
                    missed += 1
            for j in range(max(0, n - CANCEL_LAG), n):
                if j % 10 and await cancel(keys[j]) is not canceled:
                    missed += 1
            sched_end = time.perf_counter()
            try:
                end = await asyncio.wait_for(done, _timeout(n, window))
            except TimeoutError:
                raise TimeoutError(f"engine fired {count} of {want} survivors") from None
            m = _result(n, t0, sched_end, end, c0)
            m["cancelled_fired"] = leaked
            m["cancel_not_canceled"] = missed
            return m

    return peers.run_on("asyncio", main)


# ---------------------------------------------------------------------------------------------
# the figure

ENGINE_ONE = "wheel-engine schedule()"
ENGINE_MANY = "wheel-engine schedule_many()"
ENGINE_ASYNC = "wheel-engine schedule_many(), async handler"
ASYNCIO = "asyncio call_at"
UVLOOP = "uvloop call_at"


def _contenders(
    offs: list[float],
    window: float,
    loop_fn: Callable[[str, list[float], float], Metrics],
    engine_fns: list[tuple[str, Callable[[], Metrics]]],
) -> list[Contender]:
    eng = engine_missing(False)
    uv = peers.uvloop_missing()
    cs = [Contender(name, fn, skip=eng) for name, fn in engine_fns]
    cs.append(Contender(ASYNCIO, lambda: loop_fn("asyncio", offs, window)))
    cs.append(Contender(UVLOOP, lambda: loop_fn("uvloop", offs, window), skip=uv))
    return cs


def e2e_comparison(cfg: Config, n: int, reps: int, key: str) -> Comparison:
    offs = offsets(n, cfg.inmem_window)
    w = cfg.inmem_window
    cs = _contenders(
        offs,
        w,
        loop_e2e,
        [
            (ENGINE_ONE, lambda: engine_e2e(offs, w, many=False)),
            (ENGINE_MANY, lambda: engine_e2e(offs, w, many=True)),
            (ENGINE_ASYNC, lambda: engine_e2e(offs, w, many=True, coro=True)),
        ],
    )
    return FIGURE.compare(
        cfg,
        key=key,
        title=f"in memory, schedule then fire {n:,} timers over {w:g} s, end to end",
        contenders=cs,
        anchor=ASYNCIO,
        reps=reps,
        params={"n": n, "window_s": w, "tick_s": 0.001, "batch": BATCH},
        extra_metrics=("cpu_seconds", "schedule_seconds"),
    )


def run(cfg: Config, series: dict[str, Any]) -> list[Comparison]:
    main = e2e_comparison(cfg, cfg.inmem_n, cfg.inmem_reps, "inmemory.e2e")
    comps: list[Comparison] = [main, cancel_comparison(cfg)]
    sweep: dict[str, dict[str, float]] = {}
    for n in cfg.sweep:
        comp = main if n == cfg.inmem_n else None
        if comp is None:
            reps = 1 if n >= 1_000_000 else cfg.sweep_reps
            comp = e2e_comparison(cfg, n, reps, f"inmemory.sweep.{n}")
            comp.params["sweep"] = True
            comps.append(comp)
        for res in comp.results:
            med = res.median("rate")
            if med is not None:
                sweep.setdefault(res.name, {})[str(n)] = med
    series["throughput_vs_n"] = {"unit": "timers/s", "window_s": cfg.inmem_window, "data": sweep}
    return comps


def cancel_comparison(cfg: Config) -> Comparison:
    n = cfg.cancel_n
    offs = offsets(n, cfg.inmem_window, seed=2)
    w = cfg.inmem_window
    cs = _contenders(
        offs,
        w,
        loop_cancel_mix,
        [("wheel-engine schedule()+cancel()", lambda: engine_cancel_mix(offs, w))],
    )
    return FIGURE.compare(
        cfg,
        key="inmemory.cancel",
        title=f"in memory, cancel-heavy: {n:,} timers, 90% cancelled before due",
        contenders=cs,
        anchor=ASYNCIO,
        reps=cfg.inmem_reps,
        params={"n": n, "window_s": w, "cancel_lag": CANCEL_LAG},
        extra_metrics=("cpu_seconds", "cancelled_fired"),
    )
