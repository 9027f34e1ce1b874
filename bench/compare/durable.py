"""Figure 4: durable scheduling throughput (each call returns only once it is committed).

One comparison per durability, each anchored on raw ``sqlite3`` doing the least a journal must:
insert one msgpack row per timer, 1,000 rows per transaction, WAL, ``synchronous`` FULL for
"full" and NORMAL for "normal" (the ceiling).

- wheel-engine ``schedule_many``: batches of 1,000, awaited one after the other.
- wheel-engine ``schedule`` x N concurrent: N awaited ``schedule`` calls under one
  ``asyncio.gather`` (the engine may group-commit them), on the default loop (the target's)
  and on uvloop's, whose tasks and futures, a large part of this contender's cost, are cheaper.
- wheel-engine ``schedule`` one by one: each awaited before the next (one commit each).
- APScheduler 3: ``add_job(trigger="date")`` into a ``SQLAlchemyJobStore`` on SQLite (its
  defaults: rollback journal, synchronous FULL), one transaction per job.
- huey: ``task.schedule(eta=...)`` on ``SqliteHuey`` (WAL), one insert per task; for "full"
  its default (SQLite's synchronous FULL), for "normal" ``fsync=False`` (synchronous OFF: huey
  has no NORMAL setting, so this flatters huey).

APScheduler and huey each run in a child process of their own (:mod:`bench.compare.isolated`):
imported here, their libraries' 37,000 objects would be walked by every full collection of the
rounds after them: about 60 ms more per concurrent ``schedule()`` burst.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from pathlib import Path
from typing import Any

from bench.compare import isolated, peers
from bench.compare.config import Config
from bench.compare.inmemory import BATCH
from bench.compare.measure import RATE, Comparison, Contender, Figure, Metrics
from bench.compare.subject import HANDLER, engine_missing, new_engine, register

#: The figure this module draws: what its comparisons measure.
FIGURE = Figure("4", RATE, ("n",))

_seq = itertools.count()


def fresh_db(cfg: Config, name: str) -> Path:
    p = cfg.scratch / f"{name}-{next(_seq)}.db"
    peers.remove_db(p)
    return p


def _noop(firing: Any) -> None:
    pass


def engine_schedule(
    path: Path, n: int, durability: str, mode: str, loop: str = "asyncio"
) -> Metrics:
    """mode: "many" (schedule_many in batches of 1,000), "gather" (n concurrent schedule calls)
    or "serial" (schedule awaited one by one); ``loop``: "asyncio" or "uvloop"."""

    async def main() -> Metrics:
        engine = new_engine(path, durability=durability)
        register(engine, _noop)
        async with engine:
            base = time.time() + 3600.0
            t0 = time.perf_counter()
            if mode == "many":
                for start in range(0, n, BATCH):
                    await engine.schedule_many(
                        [
                            {"handler": HANDLER, "at": base + i * 1e-3}
                            for i in range(start, min(n, start + BATCH))
                        ]
                    )
            elif mode == "gather":
                await asyncio.gather(
                    *(engine.schedule(HANDLER, at=base + i * 1e-3) for i in range(n))
                )
            else:
                for i in range(n):
                    await engine.schedule(HANDLER, at=base + i * 1e-3)
            el = time.perf_counter() - t0
            pending = engine.stats().get("pending")
        if pending is not None and pending != n:
            raise AssertionError(f"engine reports {pending} pending, expected {n}")
        peers.remove_db(path)
        return {"rate": n / el, "seconds": el, "n": n}

    return peers.run_on(loop, main)


def _raw(cfg: Config, n: int, durability: str) -> Metrics:
    p = fresh_db(cfg, f"raw-{durability}")
    try:
        return peers.raw_insert(p, n, durability)
    finally:
        peers.remove_db(p)


def _aps(cfg: Config, n: int) -> Metrics:
    p = fresh_db(cfg, "aps")
    try:
        return isolated.in_child("aps_schedule", p, n)
    finally:
        peers.remove_db(p)


def _huey(cfg: Config, n: int, fsync: bool | None) -> Metrics:
    p = fresh_db(cfg, "huey")
    try:
        return isolated.in_child("huey_schedule", p, n, fsync)
    finally:
        peers.remove_db(p)


def _eng(cfg: Config, n: int, durability: str, mode: str, loop: str = "asyncio") -> Metrics:
    p = fresh_db(cfg, f"engine-{durability}")
    try:
        return engine_schedule(p, n, durability, mode, loop)
    finally:
        peers.remove_db(p)


def raw_name(durability: str) -> str:
    return f"raw sqlite3 ({durability}, 1,000/txn)"


def many_name(durability: str) -> str:
    return f"wheel-engine schedule_many ({durability})"


def gather_name(cfg: Config, durability: str, loop: str = "asyncio") -> str:
    on = " on uvloop" if loop == "uvloop" else ""
    return f"wheel-engine {cfg.dur_gather_n:,} concurrent schedule{on} ({durability})"


def run(cfg: Config, series: dict[str, Any]) -> list[Comparison]:
    comps: list[Comparison] = []
    eng = engine_missing(True)
    uv = eng or peers.uvloop_missing()
    aps = peers.apscheduler_missing()
    hu = peers.huey_missing()
    for d in ("full", "normal"):
        cs = [
            Contender(raw_name(d), lambda d=d: _raw(cfg, cfg.dur_n, d)),  # type: ignore[misc]
            Contender(
                many_name(d),
                lambda d=d: _eng(cfg, cfg.dur_n, d, "many"),  # type: ignore[misc]
                skip=eng,
            ),
            Contender(
                gather_name(cfg, d),
                lambda d=d: _eng(cfg, cfg.dur_gather_n, d, "gather"),  # type: ignore[misc]
                skip=eng,
            ),
            Contender(
                gather_name(cfg, d, "uvloop"),
                lambda d=d: _eng(cfg, cfg.dur_gather_n, d, "gather", "uvloop"),  # type: ignore[misc]
                skip=uv,
                note="the same calls on uvloop's loop, whose tasks and futures cost less",
            ),
            Contender(
                f"wheel-engine schedule one by one ({d})",
                lambda d=d: _eng(cfg, cfg.dur_serial_n, d, "serial"),  # type: ignore[misc]
                skip=eng,
            ),
        ]
        if d == "full":
            cs.append(
                Contender(
                    "APScheduler 3 add_job",
                    lambda: _aps(cfg, cfg.dur_aps_n),
                    skip=aps,
                    note=peers.APS_NOTE + f"; {cfg.dur_aps_n:,} jobs",
                )
            )
            cs.append(
                Contender(
                    "huey SqliteHuey schedule",
                    lambda: _huey(cfg, cfg.dur_huey_n, None),
                    skip=hu,
                    note=f"default fsync (SQLite synchronous FULL), WAL; {cfg.dur_huey_n:,} tasks",
                )
            )
        else:
            cs.append(
                Contender(
                    "huey SqliteHuey schedule (fsync=False)",
                    lambda: _huey(cfg, cfg.dur_huey_n, False),
                    skip=hu,
                    note="synchronous OFF (huey has no NORMAL): not crash-safe against power loss",
                )
            )
        comps.append(
            FIGURE.compare(
                cfg,
                key=f"durable.{d}",
                title=f'durable scheduling, durability "{d}"',
                contenders=cs,
                anchor=raw_name(d),
                reps=cfg.dur_reps,
                params={
                    "n_many": cfg.dur_n,
                    "n_concurrent": cfg.dur_gather_n,
                    "n_one_by_one": cfg.dur_serial_n,
                    "batch": BATCH,
                },
            )
        )
    return comps
