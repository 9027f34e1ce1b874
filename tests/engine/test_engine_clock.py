"""The one clock protocol: ``attach``/``detach`` are part of ``Clock``, no-ops for real time."""

from __future__ import annotations

from wheel_engine import Engine
from wheel_engine.clock import Clock, SystemClock
from wheel_engine.testing import VirtualClock


async def test_the_engine_attaches_to_its_clock_while_it_runs() -> None:
    clock = VirtualClock()
    engine = Engine(None, clock=clock)
    async with engine:
        assert clock._engines == [engine]  # advance() waits for its off-loop work
    assert clock._engines == []


def test_system_clock_attach_and_detach_are_no_ops() -> None:
    clock: Clock = SystemClock()
    engine = Engine(None, clock=clock)
    clock.attach(engine)
    clock.detach(engine)
