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
