"""The trigger (``wheel_engine/firing.py``): the tick in progress is taken when the loop wakes late.

A real loop wakes up to a millisecond after the time asked (``epoll`` rounds its timeout up),
so the engine's callback for the end of tick ``k`` usually runs inside tick ``k + 1``. These
tests model that with a clock that wakes every callback ``WAKE_LATE`` seconds late.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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
