"""Where figure 4's burst goes, phase by phase, with the cyclic collector's share of each.

``python -m bench.compare.burst_phases`` runs 20,000 concurrent awaited ``schedule()`` calls at
full durability, as figure 4 does, and asyncio alone beside it (``concurrent_floor``'s futures,
no engine), three times each, and prints the milliseconds of each phase of a burst:

- ``gather``: ``asyncio.gather`` makes the 20,000 tasks; no call has run yet;
- ``first``: each call's first step, up to its await (the engine: checks, timer, row, future);
- ``commit``: the writer's transaction, while the loop waits (the engine only);
- ``resolve``: the commit's futures resolved, each task's wake-up queued (for the engine, also
  the writer task's own wake-up before its commit);
- ``second``: each call's second step (the engine: it settles and makes its ``TimerInfo``),
  and ``gather`` collecting the results;

each with the time the collector's young, middle and full collections took inside it
(``gc.callbacks``). Phases are told apart by a callback queued behind the tasks' first steps
and by the journal's ``on_commit`` hook, which runs once the commit's futures are resolved.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import sys
import tempfile
import time
from pathlib import Path

from bench.compare.concurrent_floor import Collections, FloorCalls
from wheel_engine import Engine

HANDLER = "bench"
Phases = dict[str, tuple[float, float, float, float]]  # name -> (ms, young, middle, full ms)


def phases(seen: Collections, marks: list[tuple[str, float]]) -> Phases:
    """Each phase between consecutive ``marks`` (name, its start): its length and the time of
    the young, middle and full collections ``seen`` inside it (ms)."""
    out: Phases = {}
    for (name, start), (_, end) in itertools.pairwise(marks):
        spent = [0.0, 0.0, 0.0]
        for generation, a, b in seen.runs:
            spent[generation] += max(0.0, min(b, end) - max(a, start))
        young, middle, full = (1e3 * seconds for seconds in spent)
        out[name] = (1e3 * (end - start), young, middle, full)
    return out


async def engine_burst(path: Path, n: int) -> Phases:
    """The phases of ``n`` concurrent awaited ``schedule()`` calls on an engine at ``path``."""
    engine = Engine(path, tick=0.001)
    engine.register(HANDLER, lambda firing: None)
    async with engine:
        journal = engine.journal
        assert journal is not None
        commits: list[tuple[float, float]] = []  # (seconds, when the hook ran)
        journal.on_commit = lambda count, seconds: commits.append((seconds, time.perf_counter()))
        base = time.time() + 3600.0
        gc.collect()
        with Collections() as seen:
            start = time.perf_counter()
            calls = [engine.schedule(HANDLER, at=base + i * 1e-3) for i in range(n)]
            gathered = asyncio.gather(*calls)
            made = time.perf_counter()
            first_done = _after_ready_callbacks()
            await gathered
            end = time.perf_counter()
        seconds, resolved = commits[-1]
        marks = [("gather", start), ("first", made), ("commit", first_done[0])]
        marks += [("resolve", first_done[0] + seconds), ("second", resolved), ("end", end)]
        return phases(seen, marks)


async def floor_burst(n: int) -> Phases:
    """The same phases for asyncio alone (:class:`~bench.compare.concurrent_floor.FloorCalls`:
    ``n`` gathered coroutines awaiting futures that one task resolves; no commit phase)."""
    floor = FloorCalls(n)
    gc.collect()
    with Collections() as seen:
        start = time.perf_counter()
        resolver = asyncio.ensure_future(floor.resolve())
        gathered = asyncio.gather(*floor.calls())
        made = time.perf_counter()
        first_done = _after_ready_callbacks()
        await gathered
        end = time.perf_counter()
    await resolver
    marks = [("gather", start), ("first", made), ("resolve", first_done[0])]
    return phases(seen, [*marks, ("second", floor.resolved_at), ("end", end)])


def _after_ready_callbacks() -> list[float]:
    """A list that gets the time once every callback queued so far has run: the tasks' first
    steps, queued by ``gather`` just before."""
    when: list[float] = []

    def mark() -> None:
        when.append(time.perf_counter())

    asyncio.get_running_loop().call_soon(mark)
    return when


def _line(label: str, phases: Phases) -> str:
    total = sum(ms for ms, *_ in phases.values())
    parts = [
        f"{name} {ms:.0f} (gc {young:.0f}/{middle:.0f}/{full:.0f})"
        for name, (ms, young, middle, full) in phases.items()
    ]
    return f"{label}: {total:.0f} ms = " + ", ".join(parts)


def main(argv: list[str]) -> int:
    n = int(argv[0]) if argv else 20_000
    print(f"{n:,} calls; ms, and in brackets the young/middle/full collections' ms")
    with tempfile.TemporaryDirectory(prefix="wheel-engine-phases-") as where:
        for r in range(3):
            print(_line("engine        ", asyncio.run(engine_burst(Path(where) / f"{r}.db", n))))
            print(_line("asyncio alone ", asyncio.run(floor_burst(n))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
