"""Micro benchmarks of the engine's in-memory hot paths, each next to asyncio's timers.

Run: ``.venv/bin/python -m pytest bench/test_bench_engine.py --benchmark-only -q``

Each benchmark handles ``N`` timers on a fresh event loop with ``Engine(None, tick=0.001)``;
divide a figure by ``N`` for the cost per timer (``extra_info["timers"]``). The side-by-side
comparison with ratios and spread is ``wheel-engine bench`` (``bench/compare``); these are for
profiling one path at a time.

- schedule: ``await engine.schedule(...)`` one by one / ``await engine.schedule_many(...)`` in
  batches of 1,000, every timer an hour ahead; asyncio: ``loop.call_at``.
- cancel: ``await engine.cancel(key)`` of N pending timers; asyncio: ``handle.cancel()``.
- fire: schedule N timers that are already due and run the loop until every handler ran;
  asyncio: the same with ``call_at`` in the past.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest

from wheel_engine import Engine

N = 10_000
BATCH = 1_000
ROUNDS = 10
H = "bench"


def _noop(*_: Any) -> None:
    pass


class _Engines:
    """Started in-memory engines, closed at the end of the test."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.engines: list[Engine] = []

    def new(self, handler: Any = _noop) -> Engine:
        engine = self.make(handler)
        self.loop.run_until_complete(engine.start())
        return engine

    def make(self, handler: Any = _noop) -> Engine:
        """An engine not started yet (to start inside a running coroutine)."""
        engine = Engine(None, tick=0.001)
        engine.register(H, handler)
        self.engines.append(engine)
        return engine

    def close(self) -> None:
        for engine in self.engines:
            self.loop.run_until_complete(engine.close())


@pytest.fixture
def engines(loop: asyncio.AbstractEventLoop) -> Iterator[_Engines]:
    es = _Engines(loop)
    yield es
    es.close()


def _info(benchmark: Any) -> None:
    benchmark.extra_info["timers"] = N


# ---------------------------------------------------------------------------------------------
# schedule


def test_schedule_one_by_one(benchmark: Any, engines: _Engines) -> None:
    async def run(engine: Engine) -> None:
        base = time.time() + 3600.0
        schedule = engine.schedule
        for i in range(N):
            await schedule(H, at=base + i * 1e-4)

    _info(benchmark)
    benchmark.pedantic(
        lambda e: engines.loop.run_until_complete(run(e)),
        setup=lambda: ((engines.new(),), {}),
        rounds=ROUNDS,
    )


def test_schedule_many(benchmark: Any, engines: _Engines) -> None:
    async def run(engine: Engine) -> None:
        base = time.time() + 3600.0
        for s in range(0, N, BATCH):
            await engine.schedule_many(
                [{"handler": H, "at": base + i * 1e-4} for i in range(s, s + BATCH)]
            )

    _info(benchmark)
    benchmark.pedantic(
        lambda e: engines.loop.run_until_complete(run(e)),
        setup=lambda: ((engines.new(),), {}),
        rounds=ROUNDS,
    )


def test_asyncio_call_at(benchmark: Any, loop: asyncio.AbstractEventLoop) -> None:
    handles: list[asyncio.TimerHandle] = []

    def run() -> None:
        base = loop.time() + 3600.0
        call_at = loop.call_at
        for i in range(N):
            handles.append(call_at(base + i * 1e-4, _noop))

    _info(benchmark)
    benchmark.pedantic(run, rounds=ROUNDS)
    for h in handles:
        h.cancel()


# ---------------------------------------------------------------------------------------------
# cancel


def test_cancel(benchmark: Any, engines: _Engines) -> None:
    keys = [f"k{i}" for i in range(N)]

    def setup() -> tuple[tuple[Engine], dict[str, Any]]:
        engine = engines.new()
        base = time.time() + 3600.0

        async def fill() -> None:
            for s in range(0, N, BATCH):
                await engine.schedule_many(
                    [
                        {"handler": H, "at": base + i * 1e-4, "key": keys[i]}
                        for i in range(s, s + BATCH)
                    ]
                )

        engines.loop.run_until_complete(fill())
        return (engine,), {}

    async def run(engine: Engine) -> None:
        cancel = engine.cancel
        for k in keys:
            await cancel(k)

    _info(benchmark)
    benchmark.pedantic(
        lambda e: engines.loop.run_until_complete(run(e)), setup=setup, rounds=ROUNDS
    )


def test_asyncio_cancel(benchmark: Any, loop: asyncio.AbstractEventLoop) -> None:
    def setup() -> tuple[tuple[list[asyncio.TimerHandle]], dict[str, Any]]:
        base = loop.time() + 3600.0
        return ([loop.call_at(base + i * 1e-4, _noop) for i in range(N)],), {}

    def run(handles: list[asyncio.TimerHandle]) -> None:
        for h in handles:
            h.cancel()

    _info(benchmark)
    benchmark.pedantic(run, setup=setup, rounds=ROUNDS)


# ---------------------------------------------------------------------------------------------
# fire: N timers already due, until every handler ran


def test_fire_due(benchmark: Any, engines: _Engines) -> None:
    async def run() -> None:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        count = 0

        def h(firing: Any) -> None:
            nonlocal count
            count += 1
            if count == N:
                done.set_result(None)

        engine = engines.make(h)
        await engine.start()
        now = time.time()
        for s in range(0, N, BATCH):
            await engine.schedule_many(
                [{"handler": H, "at": now - 1.0 + i * 1e-6} for i in range(s, s + BATCH)]
            )
        await done

    _info(benchmark)
    benchmark.pedantic(lambda: engines.loop.run_until_complete(run()), rounds=ROUNDS)


def test_asyncio_fire_due(benchmark: Any, loop: asyncio.AbstractEventLoop) -> None:
    async def run() -> None:
        done: asyncio.Future[None] = loop.create_future()
        count = 0

        def cb() -> None:
            nonlocal count
            count += 1
            if count == N:
                done.set_result(None)

        base = loop.time() - 1.0
        call_at = loop.call_at
        for i in range(N):
            call_at(base + i * 1e-6, cb)
        await done

    _info(benchmark)
    benchmark.pedantic(lambda: loop.run_until_complete(run()), rounds=ROUNDS)
