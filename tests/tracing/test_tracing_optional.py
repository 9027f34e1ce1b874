"""OpenTelemetry stays optional: the default install does not depend on it, and neither
``import wheel_engine`` nor an engine's start imports it (an application that does not use it
pays nothing)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).parents[2]

BLOCKED = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ImportError("blocked: " + name)
sys.meta_path.insert(0, Block())
"""

RUN = """
import asyncio, sys
import wheel_engine
from wheel_engine import Engine, tracing
from wheel_engine.testing import VirtualClock

async def main():
    clock = VirtualClock()
    engine = Engine(None, clock=clock)
    engine.register("h", lambda f: None)
    async with engine:
        await engine.schedule("h", delay=1)
        await clock.advance(2)
    assert tracing.current_context() is None
    assert not tracing.enabled()

asyncio.run(main())
print(sorted(m for m in sys.modules if m.startswith("opentelemetry")))
"""


def run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    return done.stdout.strip()


def test_engine_runs_without_opentelemetry() -> None:
    assert run(BLOCKED + RUN) == "[]"


def test_installed_opentelemetry_is_not_imported_by_the_engine() -> None:
    assert run(RUN) == "[]"


def test_opentelemetry_is_an_optional_extra_only() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not any("opentelemetry" in d for d in project["dependencies"])
    assert project["optional-dependencies"]["otel"] == ["opentelemetry-api>=1.20"]
