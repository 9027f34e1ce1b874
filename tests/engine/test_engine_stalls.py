"""The engine keeps the wheel's cascade work spread out: no loop callback moves a big slot."""

from __future__ import annotations

from collections.abc import Callable

from wheel_engine import Engine
from wheel_engine.testing import VirtualClock
from wheel_engine.wheel.wheel import DEFAULT_BUDGET

BUDGET = DEFAULT_BUDGET  # the wheel's staging budget per call


async def test_no_loop_callback_cascades_more_than_a_budget() -> None:
    clock = VirtualClock()
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

    # Every wake-up and every idle staging step is one loop callback: measure each.
    engine._trigger.on_tick = measured(engine._trigger.on_tick)  # type: ignore[method-assign]
    engine._trigger.stage = measured(engine._trigger.stage)  # type: ignore[method-assign]
    async with engine:
        # 30,000 timers over 12 s cross level-2 slots (4,096 ticks) of up to ~10,000 timers
        # each, which a plain hierarchical wheel cascades inside one advance().
        requests = [{"handler": "h", "delay": 0.5 + 12.0 * i / 30_000} for i in range(30_000)]
        await engine.schedule_many(requests)
        await clock.advance(14)
        assert engine.stats()["succeeded"] == 30_000
    assert 0 < worst <= 2 * BUDGET, worst
