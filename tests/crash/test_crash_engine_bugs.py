"""Engine bugs the crash tests found, each pinned by a minimal strict-xfail reproduction.

When one is fixed its test XPASSes, which fails (strict): then drop the xfail mark, and the
tolerance named in its reason from the crash tests.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from crash_support import freeze_writer

from wheel_engine import CancelResult, Engine, Firing, TimerState
from wheel_engine.testing import VirtualClock


@pytest.mark.xfail(
    strict=True,
    reason="Engine._complete(timer, None, cancelled=True) takes the success branch first: a "
    "timer cancelled while its attempt commits ends SUCCEEDED with an Ack, its handler never run "
    "(tolerated in test_crash_sigkill.py as CANCEL_RACE_ACKS)",
)
async def test_cancel_while_the_attempt_commits_ends_canceled_not_succeeded(tmp_path: Path) -> None:
    clock = VirtualClock()
    fired: list[Firing] = []
    engine = Engine(tmp_path / "t.db", clock=clock, durability="normal")

    @engine.handler("h")
    async def handle(firing: Firing) -> None:
        fired.append(firing)

    async with engine:
        await engine.schedule("h", delay=1, key="k")
        assert engine.journal is not None
        thaw = freeze_writer(engine)  # the attempt's commit will be "in flight"
        await clock.advance(1)
        assert engine.get("k").state is TimerState.RUNNING  # type: ignore[union-attr]
        assert await engine.cancel("k") is CancelResult.CANCEL_REQUESTED
        await thaw()  # the attempt commits; the handler must not run: it was cancelled
        await clock.advance(0.01)
        assert fired == []
        info = engine.get("k")
        assert info is not None
        stats = engine.stats()
        assert (info.state, stats["succeeded"], stats["canceled"]) == (TimerState.CANCELED, 0, 1)
    async with Engine(tmp_path / "t.db", clock=clock, durability="normal") as engine:
        assert engine.get("k").state is TimerState.CANCELED  # type: ignore[union-attr]
    assert not asyncio.all_tasks() - {asyncio.current_task()}
