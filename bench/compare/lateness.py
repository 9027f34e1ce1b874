"""Figure 2: how late (and whether early) timers fire.

N timers, due uniformly over ``window`` seconds starting ``lead`` seconds after scheduling
begins (shuffled order). Each callback reads ``time.time()`` and subtracts the timer's due time
(wall clock, epoch seconds). A negative difference is an *early fire*: the timer ran before its
due by the wall clock, which SPEC.md guarantee 1 forbids for wheel-engine.

asyncio and uvloop get the due converted to their loop clock once, the way a user would:
``when = loop.time() + (due - time.time())``, with ``time.time()`` read *before* ``loop.time()``
so the conversion itself can only make a timer late, never early.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from bench.compare import peers
from bench.compare.config import Config
from bench.compare.inmemory import BATCH, offsets
from bench.compare.measure import Comparison, Contender, Figure, Measure, Metrics
from bench.compare.subject import HANDLER, engine_missing, new_engine, register
from wheel_engine.stats import percentiles

#: The figure this module draws: what its comparisons measure.
FIGURE = Figure(
    "2", Measure("p99", "s", higher_is_better=False), ("p50", "max", "early", "early_pct")
)

CDF_POINTS = [i / 100 for i in range(101)] + [0.995, 0.999, 0.9999]


def summarise(lat: list[float], sched_seconds: float, lead: float) -> Metrics:
    s = sorted(lat)
    early = sum(1 for x in s if x < 0)
    cdf_qs = sorted(CDF_POINTS)
    p50, p99, p999, *cdf = percentiles(s, [0.50, 0.99, 0.999, *cdf_qs])
    return {
        "p50": p50,
        "p99": p99,
        "p999": p999,
        "max": s[-1],
        "min": s[0],
        "mean": sum(s) / len(s),
        "early": early,
        "early_pct": 100.0 * early / len(s),
        "n": len(s),
        "schedule_seconds": sched_seconds,
        "schedule_overran_lead": sched_seconds > lead,
        "cdf": [[q, v] for q, v in zip(cdf_qs, cdf, strict=True)],
    }


def loop_lateness(loop_kind: str, offs: list[float], lead: float, timeout: float) -> Metrics:
    n = len(offs)

    async def main() -> Metrics:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        lat: list[float] = []
        append = lat.append
        now = time.time

        def cb(due: float) -> None:
            append(now() - due)
            if len(lat) == n:
                done.set_result(None)

        t0 = time.perf_counter()
        wall = time.time()
        mono = loop.time()
        first = wall + lead
        call_at = loop.call_at
        for o in offs:
            due = first + o
            call_at(mono + (due - wall), cb, due)
        sched = time.perf_counter() - t0
        await asyncio.wait_for(done, timeout)
        return summarise(lat, sched, lead)

    return peers.run_on(loop_kind, main)


def engine_lateness(offs: list[float], lead: float, timeout: float, loop_kind: str) -> Metrics:
    n = len(offs)

    async def main() -> Metrics:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        lat: list[float] = []
        append = lat.append
        now = time.time

        def h(firing: Any) -> None:
            append(now() - firing.due)
            if len(lat) == n:
                done.set_result(None)

        engine = new_engine(None, tick=0.001)
        register(engine, h)
        async with engine:
            t0 = time.perf_counter()
            first = time.time() + lead
            for i in range(0, n, BATCH):
                await engine.schedule_many(
                    [{"handler": HANDLER, "at": first + o} for o in offs[i : i + BATCH]]
                )
            sched = time.perf_counter() - t0
            try:
                await asyncio.wait_for(done, timeout)
            except TimeoutError:
                raise TimeoutError(f"engine fired {len(lat)} of {n}") from None
            return summarise(lat, sched, lead)

    return peers.run_on(loop_kind, main)


ENGINE = "wheel-engine"
ENGINE_UV = "wheel-engine on uvloop"
ASYNCIO = "asyncio call_at"
UVLOOP = "uvloop call_at"


def run(cfg: Config, series: dict[str, Any]) -> list[Comparison]:
    n, w, lead = cfg.lat_n, cfg.lat_window, cfg.lat_lead
    offs = offsets(n, w, seed=3)
    timeout = lead + w + 30.0
    eng = engine_missing(False)
    uv = peers.uvloop_missing()
    cs = [
        Contender(ENGINE, lambda: engine_lateness(offs, lead, timeout, "asyncio"), skip=eng),
        Contender(ASYNCIO, lambda: loop_lateness("asyncio", offs, lead, timeout)),
        Contender(UVLOOP, lambda: loop_lateness("uvloop", offs, lead, timeout), skip=uv),
    ]
    if not cfg.quick:
        cs.insert(
            1,
            Contender(
                ENGINE_UV,
                lambda: engine_lateness(offs, lead, timeout, "uvloop"),
                skip=eng or uv,
            ),
        )
    comp = FIGURE.compare(
        cfg,
        key="lateness",
        title=f"lateness of {n:,} timers due over {w:g} s (fired minus due, wall clock)",
        contenders=cs,
        anchor=ASYNCIO,
        reps=cfg.lat_reps,
        params={"n": n, "window_s": w, "lead_s": lead, "tick_s": 0.001},
    )
    for res in comp.results:
        over = [r for r in res.reps if r is not None and r.get("schedule_overran_lead")]
        if over:
            res.note = (
                f"scheduling took longer than the {lead:g} s lead in {len(over)} round(s): "
                "the first timers were late because of scheduling, not firing"
            )
    # the CDF of the median-p99 round of each contender, for the plot
    cdfs: dict[str, list[list[float]]] = {}
    for res in comp.results:
        rounds = [r for r in res.reps if r is not None and "cdf" in r]
        if rounds:
            rounds.sort(key=lambda r: r["p99"])
            cdfs[res.name] = rounds[len(rounds) // 2]["cdf"]
    series["lateness_cdf"] = {"n": n, "window_s": w, "data": cdfs}
    return [comp]
