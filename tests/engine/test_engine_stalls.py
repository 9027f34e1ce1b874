"""The engine keeps the wheel's cascade work spread out: no loop callback moves a big slot."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import Any

from wheel_engine import Engine
from wheel_engine.testing import VirtualClock
from wheel_engine.wheel.wheel import DEFAULT_BUDGET

BUDGET = DEFAULT_BUDGET  # the wheel's staging budget per call


class MeasuringClock(VirtualClock):
    """A virtual clock that measures the wheel's moves in every callback armed on it."""

    def __init__(self) -> None:
        super().__init__()
        self.measure: Callable[[Callable[[], None]], Callable[[], None]] = lambda cb: cb

    def call_at(self, when: float, callback: Callable[[], None]) -> Any:
        return super().call_at(when, self.measure(callback))


async def test_no_loop_callback_cascades_more_than_a_budget() -> None:
    clock = MeasuringClock()
    engine = Engine(None, clock=clock, tick=0.001)
    engine.register("h", lambda firing: None)
    worst = 0

    def measured(callback: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            nonlocal worst
            before = engine._table.wheel.moves
            callback()
            worst = max(worst, engine._table.wheel.moves - before)

        return run

    # Every wake-up (a clock callback) and every idle staging step (a loop callback): measure
    # each, without touching the engine's own methods.
    clock.measure = measured
    loop = asyncio.get_running_loop()
    call_soon = loop.call_soon
    loop.call_soon = lambda callback, *args, **kw: call_soon(  # type: ignore[method-assign]
        measured(functools.partial(callback, *args)), **kw
    )
    try:
        async with engine:
            # 30,000 timers over 12 s cross level-2 slots (4,096 ticks) of up to ~10,000 timers
            # each, which a plain hierarchical wheel cascades inside one advance().
            requests = [{"handler": "h", "delay": 0.5 + 12.0 * i / 30_000} for i in range(30_000)]
            await engine.schedule_many(requests)
            await clock.advance(14)
            assert engine.stats()["succeeded"] == 30_000
    finally:
        del loop.call_soon  # the loop's own method again
    assert 0 < worst <= 2 * BUDGET, worst
