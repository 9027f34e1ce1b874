"""For the CLI tests that need a running engine: ``procs`` (tests/admin/engine_process.py,
loaded by path: tests/ is no package) and an empty journal made by a real engine."""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path
from types import ModuleType

from wheel_engine import Engine
from wheel_engine.testing import VirtualClock

ADMIN_TESTS = Path(__file__).resolve().parents[1] / "admin"


def _engine_process() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "engine_process", ADMIN_TESTS / "engine_process.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


procs = _engine_process()


def fresh_journal(path: Path) -> Path:
    """An empty journal at ``path``, made (and closed) by an engine."""

    async def make() -> None:
        async with Engine(str(path), clock=VirtualClock()):
            pass

    asyncio.run(make())
    return path
