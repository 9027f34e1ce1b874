"""Micro benchmarks of the timing wheel, each next to asyncio's own timers in the same run.

Run: ``.venv/bin/python -m pytest bench/test_bench_wheel.py --benchmark-only -q``

Every benchmark handles ``N`` timers spread at random over a one-minute window of millisecond
ticks starting at a real epoch (so the ticks are ~1.7e12, as in the engine); divide a figure by
``N`` for the cost per timer (``extra_info["per_timer_us"]`` has it). The asyncio baselines use
``loop.call_at`` (a ``TimerHandle`` in a binary heap), ``handle.cancel()`` (a tombstone) and one
loop iteration that runs every past-due handle.

``test_wheel_advance_stalls`` (or ``python bench/test_bench_wheel.py [runs]``) measures the
longest single ``advance()``: 100,000 timers over 5,000 ticks, advanced tick by tick (the
cascade stalls that staging bounds; see docs/design.md (part 2)).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import Any

import pytest

from wheel_engine.wheel import TimingWheel, WheelEntry

N = 10_000
EPOCH_MS = 1_767_225_600_000
WINDOW_MS = 60_000
ROUNDS = 30

_rng = random.Random(1234)
OFFSETS = [_rng.randrange(1, WINDOW_MS) for _ in range(N)]
TICKS = [EPOCH_MS + off for off in OFFSETS]

Callback = Callable[[], None]


def _noop() -> None:
    pass


def _per_timer(benchmark: Any) -> None:
    benchmark.extra_info["timers"] = N


def _filled_wheel() -> tuple[TimingWheel[Callback], list[WheelEntry[Callback]]]:
    wheel: TimingWheel[Callback] = TimingWheel(now_tick=EPOCH_MS)
    insert = wheel.insert
    entries = [insert(tick, seq, _noop) for seq, tick in enumerate(TICKS)]
    return wheel, entries


class _Loops:
    """Fresh event loops for setup functions; each one is closed when the next is made."""

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None

    def new(self) -> asyncio.AbstractEventLoop:
        self.close()
        self.loop = asyncio.new_event_loop()
        return self.loop

    def close(self) -> None:
        if self.loop is not None:
            self.loop.close()
            self.loop = None


@pytest.fixture
def loops() -> Any:
    holder = _Loops()
    yield holder
    holder.close()


# --- schedule ---------------------------------------------------------------------------------


@pytest.mark.benchmark(group="schedule")
def test_wheel_insert(benchmark: Any) -> None:
    def setup() -> tuple[tuple[TimingWheel[Callback]], dict[str, Any]]:
        return (TimingWheel(now_tick=EPOCH_MS),), {}

    def run(wheel: TimingWheel[Callback]) -> None:
        insert = wheel.insert
        for seq, tick in enumerate(TICKS):
            insert(tick, seq, _noop)

    _per_timer(benchmark)
    benchmark.pedantic(run, setup=setup, rounds=ROUNDS)


@pytest.mark.benchmark(group="schedule")
def test_asyncio_call_at(benchmark: Any, loops: _Loops) -> None:
    def setup() -> tuple[tuple[asyncio.AbstractEventLoop], dict[str, Any]]:
        return (loops.new(),), {}

    def run(loop: asyncio.AbstractEventLoop) -> None:
        base = loop.time()
        call_at = loop.call_at
        for off in OFFSETS:
            call_at(base + off / 1000, _noop)

    _per_timer(benchmark)
    benchmark.pedantic(run, setup=setup, rounds=ROUNDS)


# --- cancel -----------------------------------------------------------------------------------


@pytest.mark.benchmark(group="cancel")
def test_wheel_remove(benchmark: Any) -> None:
    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        return _filled_wheel(), {}

    def run(wheel: TimingWheel[Callback], entries: list[WheelEntry[Callback]]) -> None:
        remove = wheel.remove
        for entry in entries:
            remove(entry)
        assert len(wheel) == 0

    _per_timer(benchmark)
    benchmark.pedantic(run, setup=setup, rounds=ROUNDS)


@pytest.mark.benchmark(group="cancel")
def test_asyncio_handle_cancel(benchmark: Any, loops: _Loops) -> None:
    def setup() -> tuple[tuple[list[asyncio.TimerHandle]], dict[str, Any]]:
        loop = loops.new()
        base = loop.time()
        return ([loop.call_at(base + off / 1000, _noop) for off in OFFSETS],), {}

    def run(handles: list[asyncio.TimerHandle]) -> None:
        for handle in handles:
            handle.cancel()

    _per_timer(benchmark)
    benchmark.pedantic(run, setup=setup, rounds=ROUNDS)


# --- dispatch ---------------------------------------------------------------------------------


@pytest.mark.benchmark(group="dispatch")
def test_wheel_advance_tick_by_tick(benchmark: Any) -> None:
    """The engine's loop: advance to ``next_tick()`` and call what comes out, until empty."""

    def setup() -> tuple[tuple[TimingWheel[Callback]], dict[str, Any]]:
        return (_filled_wheel()[0],), {}

    def run(wheel: TimingWheel[Callback]) -> None:
        next_tick = wheel.next_tick
        advance = wheel.advance
        fired = 0
        while (tick := next_tick()) is not None:
            for callback in advance(tick):
                callback()
                fired += 1
        assert fired == N

    _per_timer(benchmark)
    benchmark.pedantic(run, setup=setup, rounds=ROUNDS)


@pytest.mark.benchmark(group="dispatch")
def test_wheel_advance_one_jump(benchmark: Any) -> None:
    """Everything overdue at once (e.g. after recovery): one advance over the whole window."""

    def setup() -> tuple[tuple[TimingWheel[Callback]], dict[str, Any]]:
        return (_filled_wheel()[0],), {}

    def run(wheel: TimingWheel[Callback]) -> None:
        out = wheel.advance(EPOCH_MS + WINDOW_MS)
        for callback in out:
            callback()
        assert len(out) == N

    _per_timer(benchmark)
    benchmark.pedantic(run, setup=setup, rounds=ROUNDS)


@pytest.mark.benchmark(group="dispatch")
def test_wheel_advance_dense_slot(benchmark: Any) -> None:
    """The in-memory bench's shape: every timer within 64 ticks (about 150 a tick, inserted in
    seq order with shuffled ticks), all overdue: one slot handed out whole, by (tick, seq)."""
    ticks = [EPOCH_MS + 64 + off % 64 for off in OFFSETS]

    def setup() -> tuple[tuple[TimingWheel[Callback]], dict[str, Any]]:
        wheel: TimingWheel[Callback] = TimingWheel(now_tick=EPOCH_MS)
        for seq, tick in enumerate(ticks):
            wheel.insert(tick, seq, _noop)
        return (wheel,), {}

    def run(wheel: TimingWheel[Callback]) -> None:
        out = wheel.advance(EPOCH_MS + 1000)
        for callback in out:
            callback()
        assert len(out) == N

    _per_timer(benchmark)
    benchmark.pedantic(run, setup=setup, rounds=ROUNDS)


@pytest.mark.benchmark(group="dispatch")
def test_asyncio_dispatch_past_due(benchmark: Any, loops: _Loops) -> None:
    """One loop iteration pops every past-due ``TimerHandle`` off the heap and runs it."""
    fired = [0]

    def count() -> None:
        fired[0] += 1

    def setup() -> tuple[tuple[asyncio.AbstractEventLoop], dict[str, Any]]:
        loop = loops.new()
        base = loop.time() - WINDOW_MS / 1000 - 1
        for off in OFFSETS:
            loop.call_at(base + off / 1000, count)
        fired[0] = 0
        return (loop,), {}

    def run(loop: asyncio.AbstractEventLoop) -> None:
        loop.call_soon(loop.stop)
        loop.run_forever()
        assert fired[0] == N

    _per_timer(benchmark)
    benchmark.pedantic(run, setup=setup, rounds=ROUNDS)


# --- cascade stalls ---------------------------------------------------------------------------

STALL_N = 100_000
STALL_WINDOW = 5_000


def measure_stalls(start: int, n: int = STALL_N, window: int = STALL_WINDOW) -> dict[str, float]:
    """Wall time of each ``advance()`` call, advancing tick by tick through ``n`` timers spread
    uniformly over ``window`` ticks after ``start``; and the average cost per timer of the
    inserts plus all the advances. Returns microseconds (the per-call figures also as thread CPU
    time, which leaves out preemption by other processes)."""
    import gc
    import time

    rng = random.Random(99)
    ticks = [start + rng.randrange(1, window + 1) for _ in range(n)]
    gc.collect()
    gc.disable()
    try:
        clock = time.perf_counter
        began = clock()
        wheel: TimingWheel[int] = TimingWheel(now_tick=start)
        insert = wheel.insert
        for seq, tick in enumerate(ticks):
            insert(tick, seq, seq)
        inserted = clock()
        times = []
        cpu_times = []
        fired = 0
        advance = wheel.advance
        cpu = time.thread_time
        for tick in range(start + 1, start + window + 1):
            c0 = cpu()
            t0 = clock()
            fired += len(advance(tick))
            t1 = clock()
            cpu_times.append(cpu() - c0)
            times.append(t1 - t0)
        ended = clock()
    finally:
        gc.enable()
    assert fired == n and len(wheel) == 0
    times.sort()
    cpu_times.sort()
    return {
        # wall time includes preemption on a loaded machine; thread CPU time does not
        "advance_max_us": times[-1] * 1e6,
        "advance_p99_us": times[int(len(times) * 0.99)] * 1e6,
        "advance_p50_us": times[len(times) // 2] * 1e6,
        "advance_cpu_max_us": cpu_times[-1] * 1e6,
        "advance_cpu_p99_us": cpu_times[int(len(cpu_times) * 0.99)] * 1e6,
        "insert_per_timer_us": (inserted - began) / n * 1e6,
        "total_per_timer_us": (ended - began) / n * 1e6,
    }


@pytest.mark.benchmark(group="stalls")
@pytest.mark.parametrize("start", [0, EPOCH_MS])
def test_wheel_advance_stalls(benchmark: Any, start: int) -> None:
    """The longest single ``advance()`` advancing tick by tick through 100k timers over 5 s."""
    result = benchmark.pedantic(measure_stalls, args=(start,), rounds=3, iterations=1)
    benchmark.extra_info.update(result)


if __name__ == "__main__":
    import sys

    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    for begin in (0, EPOCH_MS):
        runs = [measure_stalls(begin) for _ in range(rounds)]
        print(f"start={begin} (median of {rounds} runs, microseconds)")
        for name in runs[0]:
            values = sorted(run[name] for run in runs)
            print(f"  {name:22s} {values[len(values) // 2]:10.1f}  (best {values[0]:.1f})")
