"""``Firing.cancel_requested`` (cooperative cancel) and the state after a cancel: it says what
really happened. Async, plain and ``thread=True`` handlers."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from journal import Attempt, Cancel
from wheel_engine import CancelResult, Engine, Firing, RetryPolicy, TimerState
from wheel_engine.testing import VirtualClock

WAIT = 5.0  # seconds a test thread waits for the other side at most (never reached when green)


def wait_until_requested(firing: Firing) -> bool:
    """A thread handler's checkpoint loop: poll the flag, as real work between steps would."""
    deadline = time.monotonic() + WAIT
    while not firing.cancel_requested:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)
    return True


async def start_thread(clock: VirtualClock, started: threading.Event) -> asyncio.Future[None]:
    """Fire the timer due in 1 s and wait for its thread to start. The clock's advance waits for
    the engine's threads, so it goes on in the background while the test acts."""
    ticking = asyncio.ensure_future(clock.advance(1))
    assert await asyncio.to_thread(started.wait, WAIT)
    return ticking


async def test_cancelled_thread_handler_that_returns_is_succeeded() -> None:
    clock = VirtualClock()
    engine = Engine(None, clock=clock)
    started = threading.Event()
    saw: list[bool] = []

    @engine.handler("t", thread=True)
    def work(firing: Firing) -> None:
        saw.append(firing.cancel_requested)
        started.set()
        saw.append(wait_until_requested(firing))  # then finishes its work and returns

    async with engine:
        await engine.schedule("t", delay=1, key="k")
        ticking = await start_thread(clock, started)
        assert await engine.cancel("k") is CancelResult.CANCEL_REQUESTED
        await ticking  # the thread has returned
        assert saw == [False, True]
        info = engine.get("k")
        assert info is not None and info.state is TimerState.SUCCEEDED
        assert engine.stats()["canceled"] == 0


async def test_cancelled_thread_handler_that_stops_by_raising_is_canceled() -> None:
    clock = VirtualClock()
    engine = Engine(None, clock=clock)
    started = threading.Event()

    @engine.handler("t", thread=True, retry=RetryPolicy(max_attempts=5))
    def work(firing: Firing) -> None:
        started.set()
        if wait_until_requested(firing):
            raise RuntimeError("stopped at a checkpoint")

    async with engine:
        await engine.schedule("t", delay=1, key="k")
        ticking = await start_thread(clock, started)
        assert await engine.cancel("k") is CancelResult.CANCEL_REQUESTED
        await ticking
        info = engine.get("k")
        assert info is not None and info.state is TimerState.CANCELED and info.attempts == 1


@pytest.mark.slow
async def test_timeout_asks_a_thread_handler_to_stop() -> None:
    """On the real clock: a virtual one cannot move while the engine's threads run."""
    engine = Engine(None)
    saw: list[bool] = []
    done = threading.Event()

    @engine.handler("t", thread=True, timeout=0.05, retry=RetryPolicy(max_attempts=1))
    def work(firing: Firing) -> None:
        saw.append(wait_until_requested(firing))
        done.set()

    async with engine:
        await engine.schedule("t", delay=0, key="k")
        assert await asyncio.to_thread(done.wait, WAIT)
        await engine.quiesce()
        assert saw == [True]
        info = engine.get("k")
        assert info is not None and info.state is TimerState.DEAD
        assert info.last_error == "timed out after 0.05 s"


async def test_async_handler_sees_the_request_with_its_cancellation() -> None:
    clock = VirtualClock()
    engine = Engine(None, clock=clock)
    saw: list[tuple[str, bool]] = []

    @engine.handler("a", timeout=10, retry=RetryPolicy(max_attempts=1))
    async def work(firing: Firing) -> None:
        saw.append((firing.key, firing.cancel_requested))
        try:
            await clock.sleep(60)
        except asyncio.CancelledError:
            saw.append((firing.key, firing.cancel_requested))
            raise

    async with engine:
        await engine.schedule("a", delay=1, key="cancelled")
        await engine.schedule("a", delay=1, key="timed-out")
        await clock.advance(1)
        assert await engine.cancel("cancelled") is CancelResult.CANCEL_REQUESTED
        await clock.advance(10)
        assert saw == [
            ("cancelled", False),
            ("timed-out", False),
            ("cancelled", True),
            ("timed-out", True),
        ]
        states = [engine.get(key).state for key in ("cancelled", "timed-out")]  # type: ignore[union-attr]
        assert states == [TimerState.CANCELED, TimerState.DEAD]


@pytest.mark.slow  # SQLite's busy handler may retry the held commit only after a second
async def test_plain_handler_cancelled_while_its_attempt_commits_never_starts(
    tmp_path: Path,
) -> None:
    """A plain handler runs on the loop, so nothing can set the flag while it runs; a cancel
    that arrives while its attempt is being committed keeps it from starting at all."""
    db = tmp_path / "t.db"
    clock = VirtualClock()
    engine = Engine(db, clock=clock, durability="normal")
    ran: list[bool] = []
    engine.register("p", lambda firing: ran.append(firing.cancel_requested))
    async with engine:
        await engine.schedule("p", delay=1, key="k")
        await engine.schedule("p", delay=2, key="other")
        other = sqlite3.connect(db, timeout=WAIT)
        other.execute("BEGIN IMMEDIATE")  # another process holds the write lock for a moment
        ticking = asyncio.ensure_future(clock.advance(1))
        while engine.get("k").state is not TimerState.RUNNING:  # type: ignore[union-attr]
            await asyncio.sleep(0)
        assert await engine.cancel("k") is CancelResult.CANCEL_REQUESTED
        other.rollback()
        other.close()
        await ticking
        assert ran == []
        assert engine.get("k").state is TimerState.CANCELED  # type: ignore[union-attr]
        assert engine.journal is not None
        history = [type(record) for _, record in await engine.journal.history("k")]
        assert history[-2:] == [Attempt, Cancel]
        await clock.advance(1)
        assert ran == [False]  # an attempt nobody asked to stop


async def test_a_handler_that_cancels_itself_and_returns_does_not_stop_the_next() -> None:
    """The cancel of the worker task outlived the attempt on Python 3.11 (``uncancel()`` leaves
    it pending) and stopped the next attempt on that worker at its first ``await``, which was
    then left RUNNING for good, as if the engine were closing."""
    clock = VirtualClock()
    engine = Engine(None, clock=clock, max_concurrency=1)
    engine.on_event(lambda event: None)  # attempts on worker tasks, not started inline

    @engine.handler("h")
    async def handler(firing: Firing) -> None:
        if firing.payload == 0:
            await engine.cancel(firing.key)  # in memory, answered without suspending
            return
        await asyncio.sleep(0)

    async with engine:
        await engine.schedule_many(
            [{"handler": "h", "delay": 1, "key": f"k{i}", "payload": i} for i in range(2)]
        )
        await clock.advance(1)
        for _ in range(3):
            await clock.advance(0)
        states = [engine.get(f"k{i}") for i in range(2)]
        assert [info.state if info else None for info in states] == [TimerState.SUCCEEDED] * 2
