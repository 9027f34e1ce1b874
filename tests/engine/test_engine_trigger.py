"""The trigger (``wheel_engine/trigger.py``): armed for the earliest due, however late the loop.

A real loop wakes up to a millisecond after the time asked (``epoll`` rounds its timeout up),
so a callback armed for a tick's start usually runs inside it, when part of its timers are due
already. These tests model that with clocks that run every callback late (``WAKE_LATE``, or a
seeded random lateness), and check that the engine adds no lateness of its own.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import Any

import pytest

from wheel_engine import Engine, Firing, TimerState
from wheel_engine.testing import VirtualClock

TICK = 0.001
WAKE_LATE = 0.0006  #: how late the modelled loop runs each callback: 0.6 of a tick
START = 1_767_225_600.0  #: a whole number of seconds, so tick boundaries are exact offsets


class LateClock(VirtualClock):
    """A virtual clock whose callbacks run ``WAKE_LATE`` seconds after the time asked."""

    def call_at(self, when: float, callback: Callable[[], None]) -> Any:
        return super().call_at(when + WAKE_LATE, callback)


def fired_log(engine: Engine) -> list[Firing]:
    fired: list[Firing] = []
    engine.register("h", fired.append)
    return fired


async def test_a_timer_due_inside_the_tick_in_progress_fires_at_the_late_wake() -> None:
    clock = LateClock(START)
    engine = Engine(None, clock=clock, tick=TICK)
    fired = fired_log(engine)
    async with engine:
        await engine.schedule("h", at=START + 0.0100, key="a")  # a tick's end
        await engine.schedule("h", at=START + 0.0104, key="b")  # 0.4 into the next tick
        await clock.advance(0.0107)  # the callback for a's tick runs at 0.0106
        # b was due by then: it fires at that wake, not at its own tick's end (0.011 + 0.0006)
        assert [f.key for f in fired] == ["a", "b"]
        b = fired[1]
        assert 0.0 <= b.fired_at - b.due < TICK, b.fired_at - b.due


async def test_a_held_timer_never_fires_early_and_keeps_its_order() -> None:
    clock = LateClock(START)
    engine = Engine(None, clock=clock, tick=TICK)
    fired = fired_log(engine)
    async with engine:
        dues = [0.0100, 0.0108, 0.0102, 0.0109, 0.0101]  # one in a's tick, the rest in the next
        for i, offset in enumerate(dues):
            await engine.schedule("h", at=START + offset, key=f"t{i}", payload=i)
        await clock.advance(0.0107)
        assert [f.key for f in fired] == ["t0", "t2", "t4"]  # due by 0.0106: in version order
        assert engine.get("t1").state is TimerState.PENDING  # type: ignore[union-attr]
        assert engine.stats()["pending"] == 2
        await clock.advance(0.01)
        assert [f.key for f in fired] == ["t0", "t2", "t4", "t1", "t3"]
        assert all(f.fired_at >= f.due for f in fired)
        assert engine.stats()["pending"] == 0


async def test_a_held_timer_can_be_cancelled_or_replaced() -> None:
    clock = LateClock(START)
    engine = Engine(None, clock=clock, tick=TICK)
    fired = fired_log(engine)
    async with engine:
        await engine.schedule("h", at=START + 0.0100, key="a")
        await engine.schedule("h", at=START + 0.0108, key="gone")
        await engine.schedule("h", at=START + 0.0109, key="moved", payload="old")
        await clock.advance(0.0107)  # both are held now: due later in the tick in progress
        assert [f.key for f in fired] == ["a"]
        assert (await engine.cancel("gone")).value == "CANCELED"
        await engine.schedule("h", at=START + 0.0200, key="moved", payload="new")
        assert engine.stats()["pending"] == 1
        await clock.advance(0.02)
        assert [(f.key, f.payload) for f in fired] == [("a", None), ("moved", "new")]
        assert engine.stats()["pending"] == 0
        assert engine.get("gone").state is TimerState.CANCELED  # type: ignore[union-attr]


async def test_a_lone_timer_is_armed_for_its_ticks_start_then_for_its_own_due() -> None:
    clock = VirtualClock(START)  # callbacks run exactly when asked
    engine = Engine(None, clock=clock, tick=TICK)
    fired = fired_log(engine)
    async with engine:
        await engine.schedule("h", at=START + 0.0104, key="a")  # 0.4 into tick 11
        # the earliest a timer of tick 11 can be due, not the tick's end (0.011)
        assert clock.next_deadline() == pytest.approx(START + 0.0100, abs=1e-6)
        await clock.advance(0.0100)
        assert fired == []  # taken out of the wheel, held: not due yet
        assert clock.next_deadline() == pytest.approx(START + 0.0104, abs=1e-6)
        await clock.advance(0.0005)  # past it: the callback runs at its due, not after
        assert [f.key for f in fired] == ["a"]
        assert fired[0].fired_at - fired[0].due == pytest.approx(0.0, abs=1e-6)


class JitterClock(VirtualClock):
    """Runs each callback a seeded random 0..``late`` seconds after the time asked."""

    def __init__(self, start: float, late: float, seed: int) -> None:
        super().__init__(start)
        self.late = late
        self._random = random.Random(seed)

    def call_at(self, when: float, callback: Callable[[], None]) -> Any:
        return super().call_at(when + self._random.uniform(0.0, self.late), callback)


@pytest.mark.parametrize("seed", range(6))
async def test_every_timer_fires_within_the_clocks_own_lateness_and_never_early(seed: int) -> None:
    late = (0.2, 0.6, 1.0, 1.7, 3.0, 0.05)[seed] * TICK
    clock = JitterClock(START, late, seed)
    engine = Engine(None, clock=clock, tick=TICK)
    fired = fired_log(engine)
    draw = random.Random(seed)
    async with engine:
        for i in range(300):  # dense and sparse stretches, some in the same tick
            await engine.schedule("h", at=START + draw.uniform(0.001, 0.05) ** 2 * 40, key=f"t{i}")
        for step in range(40):  # more, scheduled while time moves, a few due at once
            await clock.advance(draw.uniform(0.0, 0.004))
            delay = draw.choice([0.0, 0.0003, draw.uniform(0.0, 0.01)])
            await engine.schedule("h", delay=delay, key=f"s{step}")
        await clock.advance(0.2)
    assert len(fired) == 340
    lateness = [f.fired_at - f.due for f in fired]
    assert min(lateness) >= 0.0  # never early
    assert max(lateness) <= late + 1e-6  # the clock's lateness, nothing added by the engine
    latest_due = fired[0].due  # dues more than a tick apart fire in due order
    for firing in fired:
        assert firing.due > latest_due - TICK, firing
        latest_due = max(latest_due, firing.due)


async def test_a_tick_whose_start_rounds_below_its_boundary_is_still_taken() -> None:
    # (2002 - 1) * 0.001 / 0.001 floors to 2000, not 2001: a callback armed at that product
    # would find tick 2002 not started, take nothing and arm again for the same instant,
    # forever on a virtual clock. Small epoch times show it (near today's, none in 20,000).
    clock = VirtualClock(0.0)
    engine = Engine(None, clock=clock, tick=TICK)
    fired = fired_log(engine)
    async with engine:
        await engine.schedule("h", at=2.0015, key="a")  # in tick 2002
        await asyncio.wait_for(clock.advance(2.003), 10.0)
    assert [f.key for f in fired] == ["a"]
    assert fired[0].fired_at >= fired[0].due


async def test_held_timers_are_handed_on_in_due_order_the_longest_waiting_first() -> None:
    clock = LateClock(START)
    engine = Engine(None, clock=clock, tick=TICK)
    fired = fired_log(engine)
    async with engine:
        await engine.schedule("h", at=START + 0.0108, key="later")  # scheduled first
        await engine.schedule("h", at=START + 0.0107, key="sooner")
        await clock.advance(0.0106)  # tick 11's callback ran at 0.0106: both held
        assert fired == []
        await clock.advance(0.001)  # armed for 0.0107, run at 0.0113: both due at once
        assert [f.key for f in fired] == ["sooner", "later"]
        assert all(f.fired_at >= f.due for f in fired)


class RoundingClock(VirtualClock):
    """Rounds every wait to the nearest millisecond, as uvloop does: a callback may run up to
    half a millisecond before the time asked, and one asked for under half a millisecond from
    now runs at once."""

    def __init__(self, start: float) -> None:
        super().__init__(start)
        self.asked = 0

    def call_at(self, when: float, callback: Callable[[], None]) -> Any:
        self.asked += 1
        now = self.time()
        return super().call_at(now + round((when - now) * 1000) / 1000, callback)


async def test_a_loop_that_runs_timers_early_gets_no_busy_loop_and_no_early_fire() -> None:
    clock = RoundingClock(START)
    engine = Engine(None, clock=clock, tick=TICK)
    fired = fired_log(engine)
    draw = random.Random(7)
    async with engine:
        for i in range(100):
            await engine.schedule("h", at=START + draw.uniform(0.001, 0.1), key=f"t{i}")
        # without a floor on the next wait, this never returns: the callback for a due less
        # than half a millisecond away runs at once, finds it not due, arms again, forever
        await asyncio.wait_for(clock.advance(0.2), 10.0)
    assert len(fired) == 100
    lateness = [f.fired_at - f.due for f in fired]
    assert min(lateness) >= 0.0
    assert max(lateness) <= TICK + 0.0005 + 1e-6  # a tick, plus the clock's own rounding
    assert clock.asked <= 4 * len(fired)  # a few callbacks per timer, not a busy loop
