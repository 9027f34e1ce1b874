"""The trigger hands a mass expiry on at most ``HAND_ON_BUDGET`` timers per clock callback
(``wheel_engine/trigger.py``), so the loop runs other callbacks between the parts: never early,
in order, every one of them, and a timer cancelled while it waits in the backlog never runs.
"""

from __future__ import annotations

import asyncio
from typing import Any

from wheel_engine import Engine, Firing
from wheel_engine.testing import VirtualClock
from wheel_engine.trigger import HAND_ON_BUDGET

TICK = 0.001
START = 1_767_225_600.0
N = 3 * HAND_ON_BUDGET + 100


def _count_hand_ons(engine: Engine) -> list[int]:
    """The size of each batch the trigger hands on (wraps its ``on_due`` once started)."""
    sizes: list[int] = []
    trigger = engine._trigger
    on_due = trigger._on_due

    def counted(batch: list[Any], now: float) -> None:
        sizes.append(len(batch))
        on_due(batch, now)

    trigger._on_due = counted
    return sizes


async def test_a_mass_expiry_is_handed_on_in_parts_in_order_and_never_early() -> None:
    clock = VirtualClock(START)
    engine = Engine(None, clock=clock, tick=TICK)
    fired: list[Firing] = []
    engine.register("h", fired.append)
    due = START + 1.0
    async with engine:
        sizes = _count_hand_ons(engine)
        await engine.schedule_many(
            [{"handler": "h", "at": due, "key": f"k{i}", "payload": i} for i in range(N)]
        )
        await clock.advance(1.0 - TICK)
        assert fired == []  # never early
        await clock.advance(TICK)
        await clock.advance(0)
        assert sizes and max(sizes) <= HAND_ON_BUDGET
        assert len(sizes) >= 4  # the parts: more than one callback
        assert [f.payload for f in fired] == list(range(N))  # every one, in order
        assert all(f.fired_at >= f.due for f in fired)
        stats = engine.stats()
        assert stats["pending"] == 0 and stats["fired"] == N


async def test_a_timer_cancelled_in_the_backlog_never_runs() -> None:
    clock = VirtualClock(START)
    engine = Engine(None, clock=clock, tick=TICK)
    fired: list[str] = []
    engine.register("h", lambda firing: fired.append(firing.key))
    due = START + 0.5
    async with engine:
        sizes = _count_hand_ons(engine)
        await engine.schedule_many([{"handler": "h", "at": due, "key": f"k{i}"} for i in range(N)])
        trigger = engine._trigger
        original = trigger._on_due

        def cancel_the_last(batch: list[Any], now: float) -> None:
            original(batch, now)
            if len(sizes) == 1:  # the first part ran: the last is still in the backlog
                assert trigger._backlog["h"][-1].key == f"k{N - 1}"
                cancels.append(asyncio.ensure_future(engine.cancel(f"k{N - 1}")))

        cancels: list[asyncio.Future[Any]] = []
        trigger._on_due = cancel_the_last
        await clock.advance(0.5)
        await clock.advance(0)
        assert [str(await cancel) for cancel in cancels] == ["CANCELED"]
        assert len(fired) == N - 1 and f"k{N - 1}" not in fired
        assert engine.stats()["pending"] == 0


async def test_another_handlers_timer_is_not_held_behind_a_handlers_backlog() -> None:
    clock = VirtualClock(START)
    engine = Engine(None, clock=clock, tick=TICK)
    order: list[str] = []
    engine.register("a", lambda firing: order.append("a"))
    engine.register("b", lambda firing: order.append("b"))
    due = START + 0.5
    async with engine:
        sizes = _count_hand_ons(engine)
        await engine.schedule_many([{"handler": "a", "at": due} for _ in range(N)])
        await engine.schedule("b", at=due)  # due with them, after them in version order
        await clock.advance(0.5)
        await clock.advance(0)
        assert len(order) == N + 1 and max(sizes) <= HAND_ON_BUDGET + 1
        assert order.index("b") <= HAND_ON_BUDGET  # in the first part, not after N of a's
