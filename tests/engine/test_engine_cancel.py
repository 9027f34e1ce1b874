"""cancel(): the four results, versions, and what really ran."""

from __future__ import annotations

import asyncio

from wheel_engine import CancelResult, Engine, Firing, TimerState
from wheel_engine.testing import VirtualClock


async def test_cancel_pending_never_fires() -> None:
    clock = VirtualClock()
    engine = Engine(None, clock=clock)
    ran: list[str] = []
    engine.register("h", lambda f: ran.append(f.key))
    async with engine:
        await engine.schedule("h", delay=5, key="k")
        assert await engine.cancel("k") is CancelResult.CANCELED
        await clock.advance(10)
        assert ran == []
        assert engine.get("k").state is TimerState.CANCELED  # type: ignore[union-attr]
        assert await engine.cancel("k") is CancelResult.ALREADY_DONE
        assert await engine.cancel("missing") is CancelResult.NOT_FOUND
        assert engine.stats()["canceled"] == 1


async def test_stale_version_never_touches_newer_schedule() -> None:
    clock = VirtualClock()
    engine = Engine(None, clock=clock)
    ran: list[int] = []
    engine.register("h", lambda f: ran.append(f.version))
    async with engine:
        old = await engine.schedule("h", delay=5, key="k")
        new = await engine.schedule("h", delay=5, key="k")
        assert await engine.cancel("k", version=old.version) is CancelResult.NOT_FOUND
        await clock.advance(6)
        assert ran == [new.version]
        assert await engine.cancel("k", version=new.version) is CancelResult.ALREADY_DONE


async def test_cancel_running_handler_is_requested_and_handler_sees_cancellation() -> None:
    clock = VirtualClock()
    engine = Engine(None, clock=clock)
    started = asyncio.Event()
    saw_cancel: list[bool] = []

    @engine.handler("slow")
    async def slow(firing: Firing) -> None:
        started.set()
        try:
            await clock.sleep(100)
        except asyncio.CancelledError:
            saw_cancel.append(True)
            raise

    async with engine:
        await engine.schedule("slow", delay=1, key="k")
        await clock.advance(1)
        assert started.is_set()
        assert engine.get("k").state is TimerState.RUNNING  # type: ignore[union-attr]
        assert await engine.cancel("k") is CancelResult.CANCEL_REQUESTED
        await clock.settle()
        assert saw_cancel == [True]
        assert engine.get("k").state is TimerState.CANCELED  # type: ignore[union-attr]
        # The worker survived the cancellation: other timers still run.
        await engine.schedule("slow", delay=1, key="k2")
        await clock.advance(1)
        assert engine.get("k2").state is TimerState.RUNNING  # type: ignore[union-attr]
        assert await engine.cancel("k2") is CancelResult.CANCEL_REQUESTED
        await clock.settle()
        assert saw_cancel == [True, True]


async def test_handler_that_finishes_despite_cancel_request_succeeds() -> None:
    clock = VirtualClock()
    engine = Engine(None, clock=clock)

    @engine.handler("stubborn")
    async def stubborn(firing: Firing) -> None:
        try:
            await clock.sleep(10)
        except asyncio.CancelledError:
            return  # swallows the request and completes its work

    async with engine:
        await engine.schedule("stubborn", delay=1, key="k")
        await clock.advance(1)
        assert await engine.cancel("k") is CancelResult.CANCEL_REQUESTED
        await clock.settle()
        assert engine.get("k").state is TimerState.SUCCEEDED  # type: ignore[union-attr]
        task = asyncio.current_task()
        assert task is not None and not task.cancelling()
