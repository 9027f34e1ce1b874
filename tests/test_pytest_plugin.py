"""The pytest plugin (``wheel_engine.pytest_plugin``) as a user gets it: pytest run on a user's
test file in another process, the fixtures found without any import, the ``async def`` tests
that use them run by the plugin itself (no conftest hook, no pytest-asyncio)."""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

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

async def test_an_async_test_without_the_fixtures_is_left_to_pytest():
    pass

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


def run_pytest(directory: Path) -> subprocess.CompletedProcess[str]:
    """pytest on ``directory`` in a fresh process, the plugin loaded as a user's pytest loads it."""
    # Installed, the entry point loads it; from a checkout (PYTHONPATH), name it as pytest would.
    load = [] if _plugin_installed() else ["-p", "wheel_engine.pytest_plugin"]
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *load, str(directory)],
        cwd=directory,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.slow
def test_fixtures_in_a_users_test_suite(tmp_path: Path) -> None:
    (tmp_path / "test_orders.py").write_text(textwrap.dedent(USER_TESTS))
    done = run_pytest(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "2 passed" in done.stdout and "1 failed" in done.stdout
    # Only the test that uses none of the fixtures: pytest's own answer.
    failed = re.findall(r"^FAILED (\S+)", done.stdout, re.MULTILINE)
    assert [name.rpartition("::")[2] for name in failed] == [
        "test_an_async_test_without_the_fixtures_is_left_to_pytest"
    ]


#: Where the docs give an ``async def`` test for the fixtures: each must pass as written.
DOCUMENTED_EXAMPLES = ["docs/guide/testing.md", "docs/index.md", "wheel_engine/pytest_plugin.py"]


def documented_async_tests(path: Path) -> list[str]:
    """The code blocks of a page (or a docstring's ``::`` block) that define an async test."""
    text = path.read_text()
    if path.suffix == ".md":
        blocks = re.findall(r"^```python\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    else:
        blocks = [textwrap.dedent(m) for m in re.findall(r"::\n\n((?: {4}.*\n|\n)+)", text)]
    return [block for block in blocks if "async def test_" in block]


@pytest.mark.slow
def test_the_documented_async_examples_pass_with_plain_pytest(tmp_path: Path) -> None:
    count = 0
    for page in DOCUMENTED_EXAMPLES:
        (block,) = documented_async_tests(ROOT / page)
        count += 1
        (tmp_path / f"test_doc_{count}.py").write_text(block)
    done = run_pytest(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{count} passed" in done.stdout
