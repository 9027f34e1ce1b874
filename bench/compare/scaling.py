"""Figure 7: CPU per timer against the number of timers already pending (scale).

A timing wheel places and fires a timer in O(1) whatever else is pending; asyncio's loop keeps
its ``TimerHandle``\\ s in a binary heap, where a push and a pop are O(log n). This figure shows
both at 10k, 100k, 1M and 10M pending timers (quick: 10k and 100k), measured side by side.

One subprocess holds both populations at once: an asyncio loop whose heap holds N handles and,
on a second loop, ``Engine(None, tick=0.001)`` holding N timers; both get the same N dues,
uniform between one and two hours ahead. The sizes grow in place (10k, then 90k more, ...), so
10M is populated once. At each size, interleaved rounds of a fixed number of operations
(``scale_ops``) run on top of the N pending:

- schedule + fire: ``scale_ops`` timers due over ``scale_window`` seconds (shuffled offsets,
  the same for both), each scheduled alone (``await engine.schedule(...)`` against
  ``loop.call_at(...)``), timed until the last has fired;
- schedule + cancel: the same, each cancelled 100 schedules after its own (``await
  engine.cancel(key)`` against ``handle.cancel()``), timed until one more timer, due after all
  of them, has fired: asyncio removes a cancelled handle from its heap only when it reaches the
  top, so that deferred pop is in the figure too.

The metric is process CPU time (``time.process_time``) per operation, so the idle wait for dues
costs nothing and the machine's other load counts less than in a wall-clock figure. Every
callback goes through the same one-line relay (the engine's handler is registered once), so
both sides pay the same per firing.

Why a subprocess: 10M pending pairs take several GB, which the bench's own process should not
keep after the figure (a freed heap is rarely given back), nor its collector frozen. Why both
populations in one process: their rounds interleave, so a noisy neighbour slows both alike.
Why ``gc.freeze()`` after each growth: otherwise the full collections that ``gc.collect()``
between rounds does walk every pending object (seconds at 10M, a cost of the collector and of
N, not of the timer structure); the rounds' own young collections still run as usual.

Memory: before each growth the subprocess compares what it would need (the bytes per pending
pair measured so far, or :data:`PAIR_BYTES` before there is a measure, times
:data:`MARGIN`) with ``MemAvailable``; a size that does not fit is skipped with a line saying
how much it needs, and so is every larger one.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.compare.config import Config
from bench.compare.inmemory import offsets
from bench.compare.measure import Comparison, Contender, Figure, Log, Measure, Metrics
from bench.compare.pending import Scene, too_big
from bench.compare.subject import engine_missing
from bench.compare.units import fmt_ratio_spread

if TYPE_CHECKING:
    from bench.compare.targets import Target

__all__ = ["ASYNCIO", "ENGINE", "FIGURE", "OPS", "child", "run", "series_table", "targets"]

#: The figure this module draws: what its comparisons measure.
FIGURE = Figure(
    "7", Measure("cpu_per_timer", "s", higher_is_better=False), ("cpu_seconds", "leaked")
)

#: the operation mixes measured at each size: key part -> words
OPS = {"fire": "schedule + fire", "cancel": "schedule + cancel"}
ENGINE = {"fire": "wheel-engine schedule() + fire", "cancel": "wheel-engine schedule() + cancel()"}
ASYNCIO = {"fire": "asyncio call_at + fire", "cancel": "asyncio call_at + TimerHandle.cancel()"}

SERIES = "cpu_vs_pending"  #: this figure's entry in the run's series
#: issue 10's target: the wheel's cost per timer at 10M at most this times its cost at 10k
GROWTH_LIMIT = 1.5
#: idle staging below this many CPU seconds after a growth is noise, not worth a note
STAGING_SHOWN = 0.05
#: the Config fields the subprocess takes from the parent (the rest are its defaults)
SCALE_FIELDS = ("scale_sizes", "scale_ops", "scale_window", "scale_reps")


def key(op: str, n: int) -> str:
    return f"scaling.{op}.{n}"


def run(cfg: Config, series: dict[str, Any]) -> list[Comparison]:
    """Measure in a subprocess (see the module docstring) and take its comparisons back: its
    progress lines come through on stderr, its results as the last line of its stdout."""
    args = {
        "quick": cfg.quick,
        "verbose": cfg.log.verbose,
        "log_t0": cfg.log.t0,  # perf_counter is system-wide: the child's lines continue ours
        "fields": {f: getattr(cfg, f) for f in SCALE_FIELDS},
    }
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    code = f"from bench.compare.scaling import child; child({json.dumps(args)!r})"
    proc = subprocess.run(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(f"the scaling subprocess exited with {proc.returncode} (see above)")
    doc = json.loads(proc.stdout.strip().splitlines()[-1])
    comps = [Comparison.from_dict(d) for d in doc["comparisons"]]
    series[SERIES] = doc["series"]
    return comps


def child(arg_json: str) -> None:
    """The measuring subprocess: prints one JSON line (comparisons and series), then exits
    without tearing the populations down (freeing 10M objects one by one takes a while)."""
    args = json.loads(arg_json)
    cfg = Config.make(args["quick"], Path(os.getcwd()), Log(sys.stderr, args["verbose"]))
    cfg.log.t0 = args["log_t0"]
    for name, value in args["fields"].items():
        setattr(cfg, name, value)
    comps, data = measure_all(cfg, close=False)
    print(json.dumps({"comparisons": [asdict(c) for c in comps], "series": data}), flush=True)
    sys.stderr.flush()
    os._exit(0)


# ---------------------------------------------------------------------------------------------
# the figure


def measure_all(cfg: Config, *, close: bool) -> tuple[list[Comparison], dict[str, Any]]:
    """Every size in turn: grow both populations, then the two comparisons on top of them.
    ``close``: tear the populations down after (the subprocess exits instead)."""
    why = engine_missing(False)
    scene = Scene() if why is None else None
    try:
        return _measure(cfg, scene, why)
    finally:
        if close and scene is not None:
            scene.close()


def _measure(
    cfg: Config, scene: Scene | None, why: str | None
) -> tuple[list[Comparison], dict[str, Any]]:
    offs = offsets(cfg.scale_ops, cfg.scale_window, seed=3)
    comps: list[Comparison] = []
    data: dict[str, Any] = {
        "ops": cfg.scale_ops,
        "window_s": cfg.scale_window,
        "sizes": list(cfg.scale_sizes),
        "skipped": {},
        "bytes_per_pending_pair": {},
        "staging_cpu_s": {},
    }
    for n in cfg.scale_sizes:
        if why is None and scene is not None:
            why = _grow(cfg, scene, n, offs, data)
        if why is not None:
            data["skipped"][str(n)] = why
        comps += [_compare(cfg, scene, op, n, offs, why) for op in OPS]
    data["table"] = series_table(comps, data)
    return comps, data


def _grow(cfg: Config, scene: Scene, n: int, offs: list[float], data: dict[str, Any]) -> str | None:
    """Grow both sides to ``n`` pending (warming up after the first size); or say why not."""
    why = too_big(scene, n)
    if why is not None:
        cfg.log(f"scaling: skip {n:,} pending and more: {why}")
        return why
    cfg.log(f"scaling: growing both sides to {n:,} pending timers")
    data["staging_cpu_s"][str(n)] = scene.grow(n)
    if n == cfg.scale_sizes[0]:
        scene.warm_up(offs, cfg.scale_window)
    measured = scene.bytes_per_pair()
    if measured is not None:
        data["bytes_per_pending_pair"][str(n)] = measured
    return None


def _compare(
    cfg: Config, scene: Scene | None, op: str, n: int, offs: list[float], why: str | None
) -> Comparison:
    def engine_round() -> Metrics:
        assert scene is not None
        if op == "fire":
            return scene.fire(True, offs)
        return scene.cancel(True, offs, cfg.scale_window)

    def loop_round() -> Metrics:
        assert scene is not None
        if op == "fire":
            return scene.fire(False, offs)
        return scene.cancel(False, offs, cfg.scale_window)

    contenders = [
        Contender(ENGINE[op], engine_round, skip=why),
        Contender(ASYNCIO[op], loop_round, skip=why),
    ]
    return FIGURE.compare(
        cfg,
        key=key(op, n),
        title=f"in memory, CPU per timer, {OPS[op]}, with {n:,} timers pending",
        contenders=contenders,
        anchor=ASYNCIO[op],
        reps=cfg.scale_reps,
        params={"pending": n, "ops": cfg.scale_ops, "window_s": cfg.scale_window, "sweep": True},
    )


def _points(comps: list[Comparison]) -> dict[str, dict[str, list[float]]]:
    """``{contender: {N: [median, min, max]}}`` of the CPU per timer (the plot's data)."""
    points: dict[str, dict[str, list[float]]] = {}
    for comp in comps:
        for res in comp.results:
            vals = res.values(comp.metric)
            if vals:
                cell = [statistics.median(vals), min(vals), max(vals)]
                points.setdefault(res.name, {})[str(comp.params["pending"])] = cell
    return points


def series_table(comps: list[Comparison], data: dict[str, Any]) -> dict[str, Any]:
    """The figure as one table, a row per size (the report prints it in place of the per-size
    comparisons); also stores the plot's points in ``data``."""
    data["points"] = _points(comps)
    header = ["pending N"]
    for op in OPS:
        header += [f"{ENGINE[op]} (us)", f"{ASYNCIO[op]} (us)", f"x asyncio ({OPS[op]})"]
    rows = []
    by_key = {c.key: c for c in comps}
    for n in data["sizes"]:
        row = [f"{n:,}"]
        for op in OPS:
            comp = by_key.get(key(op, n))
            if comp is None or str(n) in data["skipped"]:
                row += ["skipped", "skipped", "-"]
                continue
            row += [_cell(data["points"], ENGINE[op], n), _cell(data["points"], ASYNCIO[op], n)]
            r = comp.ratios.get(ENGINE[op])
            row.append(fmt_ratio_spread(r.median, r.low, r.high) if r else "-")
        rows.append(row)
    notes = [f"{int(n):,} pending skipped: {why}" for n, why in data["skipped"].items()]
    notes += [
        f"{int(n):,} pending: {b:,.0f} B per pending pair (engine timer + TimerHandle, RSS)"
        for n, b in data["bytes_per_pending_pair"].items()
    ]
    notes += [
        f"growing to {int(n):,} pending: the engine's idle staging of the far timers took "
        f"{cpu:.2f} s of CPU, waited out before the rounds (not in the figure)"
        for n, cpu in data["staging_cpu_s"].items()
        if cpu >= STAGING_SHOWN
    ]
    return {
        "figure": FIGURE.number,
        "title": f"CPU per timer against timers pending ({data['ops']:,} operations a round "
        f"on top of N pending, due over {data['window_s']:g} s; median (min..max) of rounds)",
        "header": header,
        "rows": rows,
        "notes": notes,
    }


def _cell(points: dict[str, dict[str, list[float]]], name: str, n: int) -> str:
    """``3.71 (3.68..3.75)``: the median and min..max in microseconds."""
    got = points.get(name, {}).get(str(n))
    if got is None:
        return "-"
    med, lo, hi = (v * 1e6 for v in got)
    return f"{med:.2f} ({lo:.2f}..{hi:.2f})"


def targets(cfg: Config) -> list[Target]:
    """Issue 10's: the wheel's CPU per timer at the largest size within 1.5x of its cost at the
    smallest (asyncio's growth shown beside it), for each operation mix."""
    from bench.compare.targets import Target

    small, large = min(cfg.scale_sizes), max(cfg.scale_sizes)
    return [
        Target(
            f"wheel-engine CPU per timer ({OPS[op]}) at {large:,} pending within 1.5x of "
            f"its cost at {small:,}",
            key(op, large),
            ENGINE[op],
            GROWTH_LIMIT,
            kind="growth",
            base=key(op, small),
            peer=ASYNCIO[op],
        )
        for op in OPS
    ]
