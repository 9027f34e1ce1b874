"""The one clock protocol: ``attach``/``detach`` are part of ``Clock``, no-ops for real time;
the system clock's conversion from wall time to the loop's clock errs late, never early."""

from __future__ import annotations

import asyncio
import time

import pytest

from wheel_engine import Engine
from wheel_engine.clock import SystemClock
from wheel_engine.testing import VirtualClock


async def test_the_engine_attaches_to_its_clock_while_it_runs() -> None:
    clock = VirtualClock()
    engine = Engine(None, clock=clock)
    async with engine:
        assert clock._engines == [engine]  # advance() waits for its off-loop work
    assert clock._engines == []


STEP = 0.001  #: how far the one timeline behind both clocks moves between two readings
WALL_AT_ZERO = 1_767_225_600.0  #: the wall clock's reading when the loop's clock reads 0


class _Timeline:
    """One time behind both the wall and the loop's clock; every reading moves it on by STEP,
    as real time moves on between the two readings of a conversion."""

    def __init__(self) -> None:
        self.now = 0.0

    def read(self) -> float:
        self.now += STEP
        return self.now


def test_system_clock_never_arms_the_loop_before_the_wall_due(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    timeline = _Timeline()

    class TimelineLoop(asyncio.SelectorEventLoop):
        def time(self) -> float:
            return timeline.read()

    monkeypatch.setattr(time, "time", lambda: WALL_AT_ZERO + timeline.read())
    due = WALL_AT_ZERO + 5.0  # the loop's clock reads 5.0 when the wall clock reads the due

    async def arm() -> asyncio.TimerHandle:
        handle = SystemClock().call_at(due, lambda: None)
        assert isinstance(handle, asyncio.TimerHandle)
        handle.cancel()
        return handle

    loop = TimelineLoop()
    try:
        handle = loop.run_until_complete(arm())
    finally:
        loop.close()
    assert handle.when() >= 5.0  # late by the time between the readings, never early
