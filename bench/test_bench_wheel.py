"""Micro benchmarks of the timing wheel, each next to asyncio's own timers in the same run.

Run: ``.venv/bin/python -m pytest bench/test_bench_wheel.py --benchmark-only -q``

Every benchmark handles ``N`` timers spread at random over a one-minute window of millisecond
ticks starting at a real epoch (so the ticks are ~1.7e12, as in the engine); divide a figure by
``N`` for the cost per timer (``extra_info["per_timer_us"]`` has it). The asyncio baselines use
``loop.call_at`` (a ``TimerHandle`` in a binary heap), ``handle.cancel()`` (a tombstone) and one
loop iteration that runs every past-due handle.
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
