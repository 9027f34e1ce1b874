"""pytest fixtures for code that uses wheel-engine: an engine on a virtual clock.

Installed with wheel-engine and loaded by pytest on its own (a ``pytest11`` entry point), as
pytest-trio ships its clock fixtures. Nothing to import::

    async def test_unpaid_order_expires(timer_engine, virtual_clock):
        expired = []
        timer_engine.register("orders.expire", lambda firing: expired.append(firing.key))
        async with timer_engine:
            await timer_engine.schedule("orders.expire", delay=900, key="order:A1")
            await virtual_clock.advance(900)    # instantly: no real quarter of an hour
        assert expired == ["order:A1"]

Fixtures:

- ``virtual_clock``: a fresh :class:`~wheel_engine.testing.VirtualClock`.
- ``timer_engine``: an :class:`~wheel_engine.Engine` on that clock, **not started**: register
  handlers, then ``async with timer_engine:`` in the test (so it works with any way of running
  async tests: pytest-asyncio, anyio, or your own). In memory by default.
- ``timer_engine_path``: where ``timer_engine`` keeps its journal; ``None`` (in memory). Override
  it to test durability, e.g. ``return tmp_path / "timers.db"`` in your ``conftest.py``.

Your own fixtures of the same names win over these, as with any pytest plugin.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from wheel_engine.engine import Engine
from wheel_engine.testing import VirtualClock

__all__ = ["timer_engine", "timer_engine_path", "virtual_clock"]


@pytest.fixture
def virtual_clock() -> VirtualClock:
    """A clock whose time moves only on ``await virtual_clock.advance(seconds)``."""
    return VirtualClock()


@pytest.fixture
def timer_engine_path() -> Path | None:
    """The journal ``timer_engine`` uses: None, in memory. Override for a durable one."""
    return None


@pytest.fixture
def timer_engine(virtual_clock: VirtualClock, timer_engine_path: Path | None) -> Engine:
    """An engine on ``virtual_clock``, not started: ``async with timer_engine:`` in the test."""
    return Engine(timer_engine_path, clock=virtual_clock)
