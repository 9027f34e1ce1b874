"""A small journal with a timer in every state, made by a real engine on a virtual clock."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from wheel_engine import Engine, Firing, PermanentError, RetryPolicy
from wheel_engine.testing import VirtualClock


async def build_journal(path: Path) -> None:
    clock = VirtualClock(start=time.time())
    engine = Engine(str(path), clock=clock)

    @engine.handler("ok")
    async def ok(firing: Firing) -> None:
        pass

    @engine.handler("bad")
    async def bad(firing: Firing) -> None:
        raise PermanentError(f"order {firing.payload['order']} does not exist")

    @engine.handler("flaky", retry=RetryPolicy(max_attempts=2, initial=0.5, jitter=False))
    async def flaky(firing: Firing) -> None:
        raise ConnectionError("downstream unavailable")

    @engine.handler("mail")
    async def mail(firing: Firing) -> None:
        pass

    async with engine:
        await engine.schedule("ok", delay=1, payload={"order": "A1"}, key="done:1")
        await engine.schedule("bad", delay=1, payload={"order": "B2"}, key="dead:bad")
        await engine.schedule("flaky", delay=2, payload={"n": 1}, key="dead:flaky")
        await engine.schedule("ok", delay=3600, payload={"order": "C3"}, key="later:1")
        await engine.schedule("ok", delay=3600, payload=None, key="gone:1")
        await engine.cancel("gone:1")
        await engine.schedule("mail", delay=7200, payload={"to": "ann"}, key="mail:1")
        await clock.advance(5)
        assert engine.get("dead:flaky") is not None
        assert engine.get("dead:flaky").state.value == "DEAD"  # type: ignore[union-attr]


@pytest.fixture
def journal_file(tmp_path: Path) -> Path:
    path = tmp_path / "timers.db"
    asyncio.run(build_journal(path))
    return path
