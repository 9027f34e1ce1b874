"""The engine on the real clock, on the default loop and on uvloop: short, and only asserting
what must hold on any machine (order, never early), not how late."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from wheel_engine import Engine, Firing

uvloop = pytest.importorskip("uvloop")


async def fire_a_few() -> list[tuple[str, float, float]]:
    engine = Engine(None, tick=0.001)
    fired: list[tuple[str, float, float]] = []
    done = asyncio.Event()

    @engine.handler("h")
    def handle(firing: Firing) -> None:
        fired.append((firing.key, firing.due, time.time()))
        if len(fired) == 50:
            done.set()

    async with engine:
        base = time.time() + 0.1  # absolute dues: the schedule calls themselves take time
        for i in reversed(range(50)):
            await engine.schedule("h", at=base + i * 0.002, key=f"k{i:02d}")
        await asyncio.wait_for(done.wait(), timeout=10)
    return fired


@pytest.mark.slow
@pytest.mark.parametrize("runner", [asyncio.run, uvloop.run], ids=["asyncio", "uvloop"])
def test_real_clock_fires_in_order_and_never_early(
    runner: Callable[[Coroutine[Any, Any, list[tuple[str, float, float]]]], Any],
) -> None:
    fired = runner(fire_a_few())
    assert [key for key, _, _ in fired] == [f"k{i:02d}" for i in range(50)]
    assert all(fired_at >= due for _, due, fired_at in fired)
