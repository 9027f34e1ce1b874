"""Engine bugs the crash tests found, each pinned by a minimal reproduction.

An open bug's test is marked ``xfail(strict=True)`` (the reason says what is wrong); once it is
fixed the test XPASSes, which fails, and the mark comes off: it stays as a regression test.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from crash_support import crash, freeze_writer

from wheel_engine import CancelResult, Engine, Firing, TimerState
from wheel_engine.testing import VirtualClock

TIMEOUT = 30.0  # real seconds; everything here is instant on the virtual clock: fail, not hang


async def test_cancel_while_the_attempt_commits_ends_canceled_not_succeeded(tmp_path: Path) -> None:
    """Seen in test_crash_sigkill.py runs, fixed in b25d3ed: the engine completed such a timer
    with ``_complete(timer, None, cancelled=True)``, which took the success branch, so it ended
    SUCCEEDED (an Ack record) without its handler ever running."""
    async with asyncio.timeout(TIMEOUT):
        await _cancel_while_the_attempt_commits(tmp_path)


async def _cancel_while_the_attempt_commits(tmp_path: Path) -> None:
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


async def test_keep_returns_only_a_committed_timer(tmp_path: Path) -> None:
    async with asyncio.timeout(TIMEOUT):
        await _keep_returns_only_a_committed_timer(tmp_path)


async def _keep_returns_only_a_committed_timer(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    clock = VirtualClock()
    engine = Engine(db, clock=clock, durability="normal")
    engine.register("h", _noop)
    await engine.start()
    freeze_writer(engine)  # the first schedule's commit is in flight, and stays so
    first = asyncio.ensure_future(engine.schedule("h", delay=10, key="k"))
    await clock.settle()
    kept = asyncio.ensure_future(engine.schedule("h", delay=20, key="k", on_conflict="keep"))
    await clock.settle()
    returned = kept.done()
    await crash(engine, [first, kept])  # SIGKILL before the first schedule commits
    async with Engine(db, clock=clock, durability="normal") as again:
        again.register("h", _noop)
        info = again.get("k")
        other = await again.schedule("h", delay=5, key="other")
    if returned:  # what schedule() returned must be committed: it survives the crash
        assert info is not None and info.version == kept.result().version, (kept.result(), info)
        assert other.version > kept.result().version, "a returned version was issued again"


async def _noop(firing: Firing) -> None:
    pass
