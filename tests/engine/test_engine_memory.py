"""Finished timers are freed by reference counting once purged: no cycle keeps them alive."""

from __future__ import annotations

import sys

from wheel_engine import Engine
from wheel_engine.testing import VirtualClock


async def test_purged_timers_are_freed_without_the_cyclic_collector() -> None:
    clock = VirtualClock()
    engine = Engine(None, clock=clock, retention=0.0)
    engine.register("h", lambda firing: None)
    async with engine:
        await engine.schedule("h", delay=1, key="k")
        timer = engine._table.timers["k"]
        await clock.advance(2)  # fires and succeeds
        await engine.schedule("h", delay=1, key="other")
        await clock.advance(2)  # the next tick purges "k" (retention 0)
        assert engine.get("k") is None
        # Only this frame's name and getrefcount's argument refer to it: dropping the name
        # frees it at once (a self-reference, such as entry.item = self, would make this 3).
        assert sys.getrefcount(timer) == 2


def test_a_timer_holds_no_reference_to_itself_and_one_version() -> None:
    """The memory a pending timer costs: it is its own wheel entry with no slot pointing at
    itself (``item`` is a property), and its version is the wheel's ``seq``, not a copy."""
    from wheel_engine.timer import Timer

    timer = Timer("k", 3, "h", 1.0, None)
    assert timer.item is timer
    assert timer.seq == timer.version == 3
    timer.version = 9  # recovery's redrive fold renumbers a timer in place
    assert timer.seq == 9
    slots = [name for cls in type(timer).__mro__ for name in getattr(cls, "__slots__", ())]
    assert "_item" not in slots
    assert "version" not in slots
    assert len(slots) == len(set(slots))
