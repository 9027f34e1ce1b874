"""Micro benchmarks of the fire path alone (``wheel_engine/trigger.py``, ``starting.py``,
``inline.py``, ``workers.py``, ``outcomes.py``), each next to asyncio's own timers firing.

Run: ``.venv/bin/python -m pytest bench/test_bench_firing.py --benchmark-only -q``

Each round's setup starts an in-memory engine on a :class:`~wheel_engine.testing.VirtualClock`
and schedules ``N`` timers due ``AHEAD`` seconds later; only the firing is measured: advancing
the clock until every handler ran (the clock's own work, a heap pop per engine callback and a
few loop turns per group, is a small part of it). Divide a figure by ``N`` for the cost per
timer (``extra_info["timers"]``).

- spread: due over ``SPREAD_TICKS`` ticks (~100 a tick), one engine callback a tick;
- burst: all due at the same instant (groups of ``INLINE_BATCH``);
- async: an ``async def`` handler (run by the worker tasks);
- subscribed: a plain handler with an event subscriber (the general path: groups, events);
- asyncio: ``N`` ``call_at`` callbacks already due, the loop run until all ran.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from wheel_engine import Engine
from wheel_engine.testing import VirtualClock

N = 10_000
ROUNDS = 10
AHEAD = 1.0  #: seconds from scheduling to the first due time
SPREAD_TICKS = 100  #: ticks the spread timers are due over (1 ms each)
H = "bench"


def _noop(*_: Any) -> None:
    pass


async def _async_noop(*_: Any) -> None:
    pass


class _Rounds:
    """Per round: an engine started on a virtual clock with ``N`` timers scheduled, closed after."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.engines: list[Engine] = []

    def setup(
        self, handler: Callable[..., Any], spread: bool, subscribe: bool = False
    ) -> tuple[tuple[VirtualClock, Engine], dict[str, Any]]:
        clock = VirtualClock()
        engine = Engine(None, tick=0.001, clock=clock)
        engine.register(H, handler)
        if subscribe:
            engine.on_event(_noop)
        self.engines.append(engine)
        due = clock.time() + AHEAD
        step = SPREAD_TICKS * 0.001 / N if spread else 0.0

        async def fill() -> None:
            await engine.start()
            for s in range(0, N, 1000):
                await engine.schedule_many(
                    [{"handler": H, "at": due + i * step} for i in range(s, s + 1000)]
                )

        self.loop.run_until_complete(fill())
        return (clock, engine), {}

    def fire(self, clock: VirtualClock, engine: Engine) -> None:
        self.loop.run_until_complete(clock.advance(AHEAD + (SPREAD_TICKS + 2) * 0.001))
        assert engine.stats()["succeeded"] == N

    def close(self) -> None:
        for engine in self.engines:
            self.loop.run_until_complete(engine.close())


@pytest.fixture
def rounds(loop: asyncio.AbstractEventLoop) -> Iterator[_Rounds]:
    r = _Rounds(loop)
    yield r
    r.close()


def _bench(benchmark: Any, rounds: _Rounds, setup: Callable[[], Any]) -> None:
    benchmark.extra_info["timers"] = N
    benchmark.pedantic(rounds.fire, setup=setup, rounds=ROUNDS)


def test_fire_plain_spread(benchmark: Any, rounds: _Rounds) -> None:
    _bench(benchmark, rounds, lambda: rounds.setup(_noop, spread=True))


def test_fire_plain_burst(benchmark: Any, rounds: _Rounds) -> None:
    _bench(benchmark, rounds, lambda: rounds.setup(_noop, spread=False))


def test_fire_async_spread(benchmark: Any, rounds: _Rounds) -> None:
    _bench(benchmark, rounds, lambda: rounds.setup(_async_noop, spread=True))


def test_fire_plain_subscribed(benchmark: Any, rounds: _Rounds) -> None:
    _bench(benchmark, rounds, lambda: rounds.setup(_noop, spread=True, subscribe=True))


def test_asyncio_fire(benchmark: Any, loop: asyncio.AbstractEventLoop) -> None:
    def setup() -> tuple[tuple[asyncio.Future[None]], dict[str, Any]]:
        done: asyncio.Future[None] = loop.create_future()
        count = 0

        def cb() -> None:
            nonlocal count
            count += 1
            if count == N:
                done.set_result(None)

        base = loop.time() - 1.0
        for i in range(N):
            loop.call_at(base + i * 1e-6, cb)
        return (done,), {}

    benchmark.extra_info["timers"] = N
    benchmark.pedantic(loop.run_until_complete, setup=setup, rounds=ROUNDS)
