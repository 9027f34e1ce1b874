"""The pytest plugin (``wheel_engine.pytest_plugin``) as a user gets it: pytest run on a user's
test file in another process, the fixtures found without any import."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

USER_CONFTEST = """
import asyncio, inspect
import pytest

@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):  # the user's own way of running async tests
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    names = pyfuncitem._fixtureinfo.argnames
    asyncio.run(pyfuncitem.obj(**{name: pyfuncitem.funcargs[name] for name in names}))
    return True
"""

USER_TESTS = """
import pytest

async def test_unpaid_order_expires(timer_engine, virtual_clock):
    expired = []
    timer_engine.register("orders.expire", lambda firing: expired.append(firing.key))
    async with timer_engine:
        await timer_engine.schedule("orders.expire", delay=900, key="order:A1")
        await virtual_clock.advance(899)
        assert expired == []
        await virtual_clock.advance(1)
    assert expired == ["order:A1"]
    assert timer_engine.journal is None  # in memory by default

class TestDurable:
    @pytest.fixture
    def timer_engine_path(self, tmp_path):
        return tmp_path / "timers.db"

    async def test_journal_on_disk(self, timer_engine, timer_engine_path):
        timer_engine.register("h", lambda firing: None)
        async with timer_engine:
            await timer_engine.schedule("h", delay=5)
        assert timer_engine_path.exists()
"""


def _plugin_installed() -> bool:
    entry_points = importlib.metadata.entry_points(group="pytest11")
    return any(ep.value == "wheel_engine.pytest_plugin" for ep in entry_points)


def test_pyproject_registers_the_plugin() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["pytest11"]["wheel_engine"] == "wheel_engine.pytest_plugin"


@pytest.mark.slow
def test_fixtures_in_a_users_test_suite(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(textwrap.dedent(USER_CONFTEST))
    (tmp_path / "test_orders.py").write_text(textwrap.dedent(USER_TESTS))
    # Installed, the entry point loads it; from a checkout (PYTHONPATH), name it as pytest would.
    load = [] if _plugin_installed() else ["-p", "wheel_engine.pytest_plugin"]
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *load, str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout
