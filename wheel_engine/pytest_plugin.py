"""pytest fixtures for code that uses wheel-engine: an engine on a virtual clock.

Installed with wheel-engine and loaded by pytest on its own (a ``pytest11`` entry point), as
pytest-trio ships its clock fixtures. Nothing to import, nothing else to install: the plugin
runs the ``async def`` tests that use its fixtures, each on a fresh event loop
(``asyncio.run``)::

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
  handlers, then ``async with timer_engine:`` in the test. In memory by default.
- ``timer_engine_path``: where ``timer_engine`` keeps its journal; ``None`` (in memory). Override
  it to test durability, e.g. ``return tmp_path / "timers.db"`` in your ``conftest.py``.

Your own fixtures of the same names win over these, as with any pytest plugin.

Running async tests: a coroutine test that requests one of these fixtures runs under this
plugin, unless another runner claims it: a test marked ``asyncio`` (pytest-asyncio, which marks
every async test in its ``auto`` mode), ``anyio`` or ``trio``, or one that uses anyio's
``anyio_backend`` fixture, is left to that plugin. An ``async def`` test that uses none of these
fixtures is not this plugin's business: pytest reports it as not natively supported.
"""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path

import pytest

from wheel_engine.engine import Engine
from wheel_engine.testing import VirtualClock

__all__ = ["pytest_pyfunc_call", "timer_engine", "timer_engine_path", "virtual_clock"]

#: The fixtures that make a coroutine test this plugin's to run.
FIXTURES = frozenset({"virtual_clock", "timer_engine", "timer_engine_path"})
#: Markers (and a fixture) by which another async plugin claims a test for itself.
OTHER_RUNNERS = ("asyncio", "anyio", "trio")


@pytest.hookimpl
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Run a coroutine test that uses this plugin's fixtures on a fresh event loop."""
    test = pyfuncitem.obj
    if not inspect.iscoroutinefunction(test) or FIXTURES.isdisjoint(pyfuncitem.fixturenames):
        return None
    claimed = any(pyfuncitem.get_closest_marker(name) for name in OTHER_RUNNERS)
    if claimed or "anyio_backend" in pyfuncitem.fixturenames:
        return None
    arguments = {name: pyfuncitem.funcargs[name] for name in inspect.signature(test).parameters}
    asyncio.run(test(**arguments))
    return True


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
