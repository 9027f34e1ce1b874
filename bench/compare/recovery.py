"""Figure 6: recovery, i.e. start-up time with N pending timers in the journal.

The journal is written once per size by the engine itself (``schedule_many``, durability
normal, every timer due an hour from now) and closed. Then, interleaved:

- wheel-engine: ``Engine(path)`` + ``await engine.start()`` (what ``async with`` does before
  its body runs): lock, open, read, decode and rebuild every timer in the wheel. ``close()``
  afterwards is not timed.
- raw read-and-decode (the anchor): ``sqlite3`` reads every row of every table of the same
  file and ``msgpack``-decodes every blob column, building nothing: the least any recovery does.

Both run with the file in the page cache (it was just written or read).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from bench.compare import peers
from bench.compare.config import Config
from bench.compare.durable import fresh_db
from bench.compare.inmemory import BATCH
from bench.compare.measure import Comparison, Contender, Figure, Measure, Metrics
from bench.compare.subject import HANDLER, engine_missing, new_engine, register

#: The figure this module draws: what its comparisons measure.
FIGURE = Figure("6", Measure("seconds", "s", higher_is_better=False), ("rows",))


def _noop(firing: Any) -> None:
    pass


def populate(path: Path, n: int) -> float:
    async def main() -> float:
        engine = new_engine(path, durability="normal")
        register(engine, _noop)
        t0 = time.perf_counter()
        async with engine:
            base = time.time() + 3600.0
            for start in range(0, n, BATCH):
                await engine.schedule_many(
                    [
                        {"handler": HANDLER, "at": base + i * 1e-3}
                        for i in range(start, min(n, start + BATCH))
                    ]
                )
        return time.perf_counter() - t0

    return peers.run_on("asyncio", main)


def engine_start(path: Path, n: int) -> Metrics:
    async def main() -> Metrics:
        engine = new_engine(path, durability="normal")
        register(engine, _noop)
        t0 = time.perf_counter()
        await engine.start()
        el = time.perf_counter() - t0
        try:
            pending = engine.stats().get("pending")
        finally:
            await engine.close()
        if pending is not None and pending != n:
            raise AssertionError(f"engine recovered {pending} pending timers, expected {n}")
        return {"seconds": el, "rate": n / el, "n": n}

    return peers.run_on("asyncio", main)


def raw_read(path: Path, n: int) -> Metrics:
    m = peers.raw_read_decode(path)
    m["rate"] = n / m["seconds"]
    m["n"] = n
    return m


ENGINE = "wheel-engine start()"
RAW = "raw sqlite3 read + msgpack decode"


def run(cfg: Config, series: dict[str, Any]) -> list[Comparison]:
    eng = engine_missing(True)
    comps = []
    for n in cfg.rec_sizes:
        path = fresh_db(cfg, f"recovery-{n}")
        skip = eng
        populate_s = None
        if skip is None:
            cfg.log(f"recovery: writing a journal with {n:,} pending timers")
            try:
                populate_s = populate(path, n)
            except Exception as exc:
                skip = f"could not write the journal: {type(exc).__name__}: {exc}"
        cs = [
            Contender(ENGINE, lambda path=path, n=n: engine_start(path, n), skip=skip),  # type: ignore[misc]
            Contender(RAW, lambda path=path, n=n: raw_read(path, n), skip=skip),  # type: ignore[misc]
        ]
        try:
            comps.append(
                FIGURE.compare(
                    cfg,
                    key=f"recovery.{n}",
                    title=f"recovery: start-up with {n:,} pending timers",
                    contenders=cs,
                    anchor=RAW,
                    reps=cfg.rec_reps,
                    params={"n": n, "populate_s": round(populate_s or 0.0, 2)},
                )
            )
        finally:
            peers.remove_db(path)
    return comps
