"""The retention window's cost per finished timer: CPU microseconds per timer, median of rounds.

Run it from inside a tree, on two trees alternately to compare them (``-m`` puts the current
directory first, so that tree's ``wheel_engine`` is imported: pure where it has no compiled
module; the line it prints says which)::

    cd <tree> && /work/main/.venv/bin/python -m bench.retention_micro --rounds 5

Each round starts a fresh engine (not timed) and times one workload of ``--timers`` timers, on
the process's CPU clock (the machine is shared); the workloads take turns within a round.

- ``fire``: in memory, ``schedule_many`` in batches of 1,000, every timer due at once, then
  every one fires into a plain handler that only counts (the count says when all have fired),
  on a ``VirtualClock`` moved a tick at a time.
  ``--max-retained`` (default 1,000) is the engine's: below ``--timers``, every finished timer
  enters the window and is forgotten again, the window's whole cost per timer.
- ``window``: the retention window alone, on finished timers made beforehand (not timed):
  every one added, a purge after every 1,000 (as the fire path purges once per batch), then a
  purge past their retention forgets them all. Under callgrind, subtract ``window-setup`` (the
  same timers made, nothing timed) at the same ``--timers``.

For instruction counts, run one workload once under callgrind, with ``--timers 100000`` and with
``--timers 0`` (the engine, the interpreter and the imports alone), and divide the difference
by 100,000 (one command, on one line)::

    cd <tree> && valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.%p
        /work/main/.venv/bin/python -m bench.retention_micro --rounds 1 --only fire
        --timers 100000
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import time
from collections.abc import Awaitable, Callable

from bench.compare.peers import Countdown
from wheel_engine import Engine
from wheel_engine.key_index import KeyIndex
from wheel_engine.model import TimerState
from wheel_engine.retention import RetentionWindow
from wheel_engine.testing import VirtualClock
from wheel_engine.timer import Timer

H = "bench"
BATCH = 1000
RETENTION = 3600.0


async def _fire(n: int, max_retained: int) -> float:
    """Seconds of CPU to schedule and fire ``n`` timers on a fresh in-memory engine."""
    clock = VirtualClock()  # callgrind's counts repeat: no real time decides how fires batch
    engine = Engine(None, tick=0.001, clock=clock, retention=RETENTION, max_retained=max_retained)
    fired = Countdown(n, time.process_time)  # the plain handler: it only counts
    engine.register(H, fired.tick)
    await engine.start()
    try:
        gc.collect()
        started = time.process_time()
        at = engine.clock.time()
        for first in range(0, n, BATCH):
            await engine.schedule_many(
                [{"handler": H, "at": at} for _ in range(min(BATCH, n - first))]
            )
        while not fired.done.done() and n:
            await clock.advance(0.001)
        return time.process_time() - started
    finally:
        await engine.close()


FINISHED_AT = 1_000.0


def _finished_timers(n: int) -> tuple[KeyIndex, list[Timer]]:
    """``n`` SUCCEEDED timers and the index by key holding them."""
    timers = [
        Timer(f"k{i}", i + 1, H, 0.0, None, TimerState.SUCCEEDED, updated_at=FINISHED_AT)
        for i in range(n)
    ]
    index = KeyIndex()
    for timer in timers:
        index.put(timer)
    return index, timers


async def _window_setup(n: int, max_retained: int) -> float:
    """The ``window`` workload's untimed part alone (what callgrind subtracts)."""
    index, _ = _finished_timers(n)
    RetentionWindow(index, RETENTION, max_retained)
    gc.collect()
    return 0.0


async def _window(n: int, max_retained: int) -> float:
    """Seconds of CPU for the window to take in and forget ``n`` finished timers."""
    index, timers = _finished_timers(n)
    window = RetentionWindow(index, RETENTION, max_retained)
    finished_at = FINISHED_AT
    gc.collect()
    started = time.process_time()
    add = window.add
    for first in range(0, n, BATCH):
        for timer in timers[first : first + BATCH]:
            add(timer)
        window.purge(finished_at)
    window.purge(finished_at + RETENTION + 1.0)
    elapsed = time.process_time() - started
    assert not index and not len(window), "every timer is forgotten"
    return elapsed


WORKLOADS: dict[str, Callable[[int, int], Awaitable[float]]] = {
    "fire": _fire,
    "window": _window,
    "window-setup": _window_setup,  # for callgrind only: not run unless asked for
}


async def _main(rounds: int, n: int, max_retained: int, only: list[str]) -> dict[str, list[float]]:
    results: dict[str, list[float]] = {name: [] for name in only}
    for _ in range(rounds):
        for name in only:
            seconds = await WORKLOADS[name](n, max_retained)
            results[name].append(seconds / max(n, 1) * 1e6)  # --timers 0: the fixed cost
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--timers", type=int, default=100_000)
    parser.add_argument("--max-retained", type=int, default=1_000)
    parser.add_argument("--only", action="append", choices=sorted(WORKLOADS))
    args = parser.parse_args()
    only = args.only or ["fire", "window"]
    results = asyncio.run(_main(args.rounds, args.timers, args.max_retained, only))
    import wheel_engine

    print(
        f"# {wheel_engine.__file__} compiled={wheel_engine.COMPILED}: {args.timers} timers, "
        f"max_retained {args.max_retained}, {args.rounds} rounds, CPU"
    )
    for name, figures in results.items():
        print(f"{name:8s} {statistics.median(figures):8.3f} us/timer (min {min(figures):.3f})")


if __name__ == "__main__":
    main()
