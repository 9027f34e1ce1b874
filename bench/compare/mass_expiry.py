"""Figure 10: a mass expiry on SQLite: one rate-limited handler's timers all due in the same
second, beside another handler's timer due every 10 ms (issue 26).

Three contenders, each in a fresh subprocess of its own (``python -m bench.compare.mass_expiry``),
so that its peak RSS is its own and no figure inherits its heap:

- **B alone** (the anchor): handler ``b`` only, a timer due every :data:`B_EVERY` seconds;
- **B beside A's mass expiry**: the same ``b`` timers, and :attr:`Sizes.timers` timers of
  handler ``a`` registered with ``rate=`` :attr:`Sizes.rate` (its default burst, ``rate``
  tokens), their dues spread over one second;
- **B beside A, no compaction, heap frozen** (the full run only): the same, with the journal's
  automatic compaction held off (``compact_min_records`` out of reach) and ``gc.freeze()`` once
  everything is scheduled, so that neither a compaction's write transaction (which holds the
  journal's writer) nor a full collection over the live timers is in the figure: what is left is
  the dispatch's own fairness.

The measure is B's lateness p99 (the handler's wall clock minus the timer's due) over the B
timers due while A's backlog is worked off (the same window in both runs), lower is better: its
ratio to the anchor is the goal "within 2x" (0.5x). Beside it: *a_seconds*, from the start of
A's due second to A's last start; *a_x_ideal*, that over the ideal ``N / rate``; *peak_rate*,
A's most starts in one second of the wall clock; *rss_mb*, the subprocess's peak RSS. Both
handlers are plain (synchronous) functions that return at once, durability ``normal``. Each side
also says what stalls outside the dispatch it saw (:class:`_Watch`): the journal's compactions
and the longest the writer was held by one of them (no commit completes meanwhile), and the
collector's full collections and the longest of them.

The dues are fixed before the timers are scheduled, so the lead leaves room for scheduling at
:data:`SCHEDULE_FLOOR` timers/s at least; a run that took longer fails rather than measure a
backlog that fell due while it was still being written.
"""

from __future__ import annotations

import asyncio
import gc
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from bench.compare.measure import Comparison, Contender, Figure, Measure, Metrics
from bench.compare.subject import engine_missing, new_engine
from journal import Journal

if TYPE_CHECKING:
    from bench.compare.config import Config
    from bench.compare.targets import Target

#: Seconds between two of handler B's dues.
B_EVERY: Final = 0.01
#: Timers/s the lead assumes scheduling reaches at least (the pure build's ``schedule_many``).
SCHEDULE_FLOOR: Final = 25_000
#: Seconds of lead beyond the scheduling's, and of B's timers before and after the window.
LEAD: Final = 1.5
#: B's lateness p99 goal, in seconds, and its ratio to B alone (within 2x).
B_P99_GOAL: Final = 0.05
B_RATIO_GOAL: Final = 0.5
#: ``compact_min_records`` for the isolated side: a journal tail this long is never reached.
NO_COMPACTION: Final = 10**12
ALONE, BESIDE = "B alone", "B beside A's mass expiry"
ISOLATED = "B beside A, no compaction, heap frozen"
FIGURE = Figure(
    "10",
    Measure("p99", "s", higher_is_better=False),
    ("a_seconds", "a_x_ideal", "peak_rate", "rss_mb"),
)


class Sizes(NamedTuple):
    """A's backlog and its rate (the figure's own sizes, as figure 8 keeps its own)."""

    timers: int
    rate: float
    reps: int

    @classmethod
    def of(cls, cfg: Config) -> Sizes:
        return cls(10_000, 4_000.0, 1) if cfg.quick else cls(500_000, 20_000.0, 1)

    @property
    def ideal(self) -> float:
        """Seconds A needs at its rate: ``N / rate``."""
        return self.timers / self.rate


# -- one side, in its own process ---------------------------------------------------------------


class _Watch:
    """The stalls outside the dispatch during a side: full collections (``gc.callbacks``) and
    the journal's compactions (:meth:`journal.Journal.compact`, wrapped: the engine offers no
    hook there), each with its longest pause of the writer."""

    def __init__(self) -> None:
        self.gc_full: list[float] = []
        self.holds: list[float] = []
        self._gc_started = 0.0
        self._compact = Journal.compact

    def __enter__(self) -> _Watch:
        original, holds = self._compact, self.holds

        async def compact(journal: Journal, **options: Any) -> Any:
            result = await original(journal, **options)
            # getattr: the figure also measures trees from before compaction wrote in pieces
            holds.append(getattr(result, "longest_write_seconds", result.write_seconds))
            return result

        Journal.compact = compact  # type: ignore[method-assign, assignment]
        gc.callbacks.append(self._collected)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._collected)
        Journal.compact = self._compact  # type: ignore[method-assign]

    def _collected(self, phase: str, info: dict[str, int]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._gc_started = time.perf_counter()
        else:
            self.gc_full.append(time.perf_counter() - self._gc_started)

    def metrics(self) -> Metrics:
        return {
            "compactions": len(self.holds),
            "compaction_hold_max_s": max(self.holds, default=0.0),
            "gc_full": len(self.gc_full),
            "gc_full_max_s": max(self.gc_full, default=0.0),
            "gc_full_s": sum(self.gc_full),
        }


async def _side(
    path: Path, timers: int, rate: float, window: float, isolated: bool = False
) -> Metrics:
    """Schedule B (and ``timers`` of A, if any), wait for every one to start, measure;
    ``isolated``: without compaction and with the heap frozen (see the module docstring)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    a_starts: list[float] = []
    b_late: list[tuple[float, float]] = []  # (due, lateness)
    expected = [timers, 0]

    def check() -> None:
        if len(a_starts) >= expected[0] and len(b_late) >= expected[1] and not done.done():
            done.set_result(None)

    def a(firing: Any) -> None:
        a_starts.append(time.time())
        if len(a_starts) == expected[0]:
            check()

    def b(firing: Any) -> None:
        now = time.time()
        b_late.append((firing.due, now - firing.due))
        if len(b_late) >= expected[1]:
            check()

    engine = new_engine(
        path, durability="normal", **({"compact_min_records": NO_COMPACTION} if isolated else {})
    )
    engine.register("b", b)
    if timers:
        engine.register("a", a, rate=rate)
    with _Watch() as watch:
        async with engine:
            began = time.time()
            t0 = math.ceil(began + LEAD + timers / SCHEDULE_FLOOR)  # A's due second
            b_dues = [t0 - LEAD + i * B_EVERY for i in range(int((window + 2 * LEAD) / B_EVERY))]
            expected[1] = len(b_dues)
            await engine.schedule_many([{"handler": "b", "at": due} for due in b_dues])
            for first in range(0, timers, 1_000):
                count = min(1_000, timers - first)
                await engine.schedule_many(
                    [{"handler": "a", "at": t0 + (first + i) / timers} for i in range(count)]
                )
            if isolated:
                gc.collect()
                gc.freeze()
            scheduled = time.time()
            if scheduled > t0 - 0.2:
                raise RuntimeError(
                    f"scheduling {timers:,} timers took {scheduled - began:.1f} s, past the lead"
                )
            await asyncio.wait_for(done, timeout=t0 - time.time() + 3 * window + 60)
    late = sorted(lateness for due, lateness in b_late if t0 <= due < t0 + window)
    per_second = Counter(math.floor(start) for start in a_starts)
    a_seconds = max(a_starts) - t0 if a_starts else 0.0
    return {
        "p99": late[min(len(late) - 1, math.ceil(0.99 * len(late)) - 1)],
        "p50": statistics.median(late),
        "max": late[-1],
        "a_seconds": a_seconds,
        "a_x_ideal": a_seconds / (timers / rate) if timers else 0.0,
        "peak_rate": max(per_second.values(), default=0),
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "schedule_seconds": scheduled - began,
        "b_timers": len(late),
        **watch.metrics(),
    }


def child(path: str, timers: int, rate: float, window: float, isolated: bool) -> None:
    """Entry point of the measuring subprocess: prints one JSON line of metrics."""
    print(json.dumps(asyncio.run(_side(Path(path), timers, rate, window, isolated))))


def _in_subprocess(path: Path, timers: int, sizes: Sizes, isolated: bool = False) -> Metrics:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    args = [str(path), str(timers), repr(sizes.rate), repr(sizes.ideal), str(int(isolated))]
    proc = subprocess.run(
        [sys.executable, "-m", "bench.compare.mass_expiry", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120 + 4 * sizes.ideal + timers / SCHEDULE_FLOOR,
        check=False,
    )
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["?"])[-1]
        raise RuntimeError(f"measuring subprocess failed: {tail}")
    result: Metrics = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def run(cfg: Config, series: dict[str, Any]) -> list[Comparison]:
    sizes = Sizes.of(cfg)
    skip = engine_missing(True)
    contenders = [
        Contender(
            ALONE,
            lambda: _in_subprocess(cfg.scratch / "mass-expiry-alone.db", 0, sizes),
            skip=skip,
        ),
        Contender(
            BESIDE,
            lambda: _in_subprocess(cfg.scratch / "mass-expiry-beside.db", sizes.timers, sizes),
            skip=skip,
            note=f"A: {sizes.timers:,} timers due in one second, rate={sizes.rate:g}",
        ),
        Contender(
            ISOLATED,
            lambda: _in_subprocess(
                cfg.scratch / "mass-expiry-isolated.db", sizes.timers, sizes, isolated=True
            ),
            skip=skip or ("the full run only" if cfg.quick else None),
            note="the journal's automatic compaction held off, gc.freeze() after scheduling",
        ),
    ]
    comparison = FIGURE.compare(
        cfg,
        key="mass_expiry",
        title=(
            f"mass expiry on SQLite: {sizes.timers:,} timers of a handler with rate="
            f"{sizes.rate:g} due in one second; another handler's timer every "
            f"{B_EVERY * 1000:g} ms (its lateness p99)"
        ),
        contenders=contenders,
        anchor=ALONE,
        reps=sizes.reps,
        params={
            "a_timers": sizes.timers,
            "a_rate": sizes.rate,
            "ideal_s": sizes.ideal,
            "b_every_ms": B_EVERY * 1000,
        },
    )
    return [comparison]


def targets(cfg: Config) -> list[Target]:
    """Issue 26's: B's lateness p99 beside A within 2x of B alone's, and under 50 ms."""
    from bench.compare.targets import Target

    return [
        Target(
            "mass expiry: B's lateness p99 beside A within 2x of B alone",
            "mass_expiry",
            BESIDE,
            B_RATIO_GOAL,
        ),
        Target(
            f"mass expiry: B's lateness p99 beside A under {B_P99_GOAL * 1000:g} ms",
            "mass_expiry",
            BESIDE,
            B_P99_GOAL,
            kind="max",
            metric="p99",
        ),
    ]


if __name__ == "__main__":  # pragma: no cover
    child(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), sys.argv[5] == "1")
