"""Async handlers started eagerly (``wheel_engine/eager.py``): the same behaviour on both paths.

In memory with nobody listening, an async handler's first step runs inline, as a parked host
task; an event subscriber sends every attempt the general way, onto the worker tasks. Each test
runs on both paths (``path``) and checks the path was really taken (:func:`ran_as`): timeouts,
cancels (while it waits, and asked during its first step), the concurrency cap, shutdown, and
the task and context its rest runs in. The property test holds the two paths' outcomes against
each other for any mix of handlers that return, raise, wait, and cancel themselves.
"""

from __future__ import annotations

import asyncio
import contextvars

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wheel_engine import CancelResult, Engine, Firing, RetryPolicy, TimerState
from wheel_engine.testing import VirtualClock

PATHS = ("eager", "worker")
#: the coroutine of a task that hosts eager first steps, interpreted and compiled
HOST = ("EagerStarts._serve", "_serve_EagerStarts_gen")
VAR: contextvars.ContextVar[str] = contextvars.ContextVar("VAR", default="")
ONCE = RetryPolicy(max_attempts=1)


def engine_on(path: str, **options: object) -> tuple[Engine, VirtualClock]:
    clock = VirtualClock()
    engine = Engine(None, clock=clock, **options)  # type: ignore[arg-type]
    if path == "worker":
        engine.on_event(lambda event: None)  # a subscriber: the general path
    return engine, clock


def ran_as() -> str:
    """Which kind of task the caller runs in: a host of eager steps, or a worker."""
    task = asyncio.current_task()
    assert task is not None
    coro = task.get_coro()  # compiled, a native coroutine has no __qualname__: its type's name
    name = getattr(coro, "__qualname__", None) or type(coro).__name__
    return "eager" if name in HOST else "worker"


async def stopped(seen: list[object], firing: Firing | None = None) -> None:
    """Wait until stopped; note it ("stopped", or the firing's ``cancel_requested``)."""
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        seen.append("stopped" if firing is None else firing.cancel_requested)
        raise


@pytest.mark.parametrize("path", PATHS)
async def test_handlers_that_never_wait_all_succeed_on_their_path(path: str) -> None:
    engine, clock = engine_on(path)
    seen: list[object] = []

    @engine.handler("h")
    async def handler(firing: Firing) -> None:
        seen.append(ran_as())

    async with engine:
        await engine.schedule_many([{"handler": "h", "delay": 1} for _ in range(50)])
        await clock.advance(1)
        await clock.advance(0.01)
        assert seen == [path] * 50
        assert engine.stats()["succeeded"] == 50
        if path == "eager":  # one host took every step and no worker task was made
            assert not engine._dispatcher.pool.tasks


@pytest.mark.parametrize("path", PATHS)
async def test_the_rest_runs_on_the_task_and_in_the_context_the_first_step_saw(path: str) -> None:
    engine, clock = engine_on(path)
    release = asyncio.Event()
    seen: list[tuple[str, bool, str]] = []

    @engine.handler("h")
    async def handler(firing: Firing) -> None:
        first = asyncio.current_task()
        kind = ran_as()
        token = VAR.set(firing.key)
        async with asyncio.timeout(100):  # captures the current task: must be the one going on
            async with asyncio.TaskGroup() as group:
                group.create_task(release.wait())
        seen.append((kind, asyncio.current_task() is first, VAR.get()))
        VAR.reset(token)  # fails in another context than the one it was set in

    async with engine:
        await engine.schedule_many([{"handler": "h", "delay": 1, "key": f"k{i}"} for i in range(3)])
        await clock.advance(1)
        assert engine.stats()["running"] == 3
        release.set()
        await clock.advance(0.01)
        await clock.advance(0.01)
        # the first attempt's step ran as the parked host; the host made then was not parked
        # yet for the next two, which went to workers
        expected = ["eager", "worker", "worker"] if path == "eager" else ["worker"] * 3
        assert [s[0] for s in seen] == expected
        assert all(same and var.startswith("k") for _, same, var in seen)
        assert engine.stats()["succeeded"] == 3


@pytest.mark.parametrize("path", PATHS)
async def test_a_timeout_counts_from_the_first_step(path: str) -> None:
    engine, clock = engine_on(path)
    seen: list[object] = []

    @engine.handler("h", timeout=2.0, retry=ONCE)
    async def handler(firing: Firing) -> None:
        seen.append(ran_as())
        await stopped(seen)

    async with engine:
        await engine.schedule("h", delay=1, key="k")
        await clock.advance(1)
        await clock.advance(1.9)
        info = engine.get("k")
        assert info is not None and info.state is TimerState.RUNNING
        await clock.advance(0.2)
        info = engine.get("k")
        assert seen == [path, "stopped"]
        assert info is not None and info.state is TimerState.DEAD
        assert info.last_error == "timed out after 2.0 s"


@pytest.mark.parametrize("path", PATHS)
async def test_a_cancel_reaches_a_waiting_handler(path: str) -> None:
    engine, clock = engine_on(path)
    seen: list[object] = []

    @engine.handler("h")
    async def handler(firing: Firing) -> None:
        seen.append(ran_as())
        await stopped(seen, firing)

    async with engine:
        await engine.schedule("h", delay=1, key="k")
        await clock.advance(1)
        assert await engine.cancel("k") is CancelResult.CANCEL_REQUESTED
        await clock.advance(0.01)
        info = engine.get("k")
        assert seen == [path, True]
        assert info is not None and info.state is TimerState.CANCELED
        assert engine.stats()["running"] == 0


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("then", ["waits", "returns"])
async def test_a_cancel_asked_in_the_first_step(path: str, then: str) -> None:
    """Asked and answered within the first step (in memory a cancel does not suspend): the
    handler sees it at once, a handler that then waits is stopped at its first ``await``, one
    that returns has done its work (SUCCEEDED, as for a handler on a worker)."""
    engine, clock = engine_on(path)
    seen: list[object] = []

    @engine.handler("h")
    async def handler(firing: Firing) -> None:
        seen.append(ran_as())
        seen.append(await engine.cancel(firing.key))
        seen.append(firing.cancel_requested)
        if then == "waits":
            await stopped(seen)

    async with engine:
        await engine.schedule("h", delay=1, key="k")
        await clock.advance(1)
        await clock.advance(0.01)
        info = engine.get("k")
        assert info is not None
        assert seen[:3] == [path, CancelResult.CANCEL_REQUESTED, True]
        if then == "waits":
            assert seen[3:] == ["stopped"] and info.state is TimerState.CANCELED
        else:
            assert seen[3:] == [] and info.state is TimerState.SUCCEEDED
        # the engine goes on: the next timer's attempt runs too, on the same path
        await engine.schedule("h", delay=1, key="n")
        await clock.advance(1)
        await clock.advance(0.01)
        assert seen[-3 if then == "returns" else -4] == path


@pytest.mark.parametrize("path", PATHS)
async def test_waiting_handlers_hold_the_concurrency_cap(path: str) -> None:
    engine, clock = engine_on(path, max_concurrency=2)
    release = asyncio.Event()
    running = [0, 0]  # now, most at once

    @engine.handler("h")
    async def handler(firing: Firing) -> None:
        running[0] += 1
        running[1] = max(running)
        await release.wait()
        running[0] -= 1

    async with engine:
        await engine.schedule_many([{"handler": "h", "delay": 1} for _ in range(5)])
        for _ in range(3):
            await clock.advance(1)
        assert running == [2, 2] and engine.stats()["running"] == 2
        release.set()
        for _ in range(5):
            await clock.advance(0.01)
        assert running == [0, 2] and engine.stats()["succeeded"] == 5


@pytest.mark.parametrize("path", PATHS)
async def test_close_stops_a_waiting_handler_and_leaves_no_task(path: str) -> None:
    engine, clock = engine_on(path)
    seen: list[object] = []

    @engine.handler("h")
    async def handler(firing: Firing) -> None:
        seen.append(ran_as())
        await stopped(seen)

    await engine.start()
    await engine.schedule("h", delay=1, key="k")
    await clock.advance(1)
    await engine.close(grace=0)
    assert seen == [path, "stopped"]
    assert asyncio.all_tasks() == {asyncio.current_task()}


@pytest.mark.parametrize("path", PATHS)
async def test_a_first_step_that_raises_is_retried(path: str) -> None:
    engine, clock = engine_on(path)
    seen: list[object] = []

    @engine.handler("h", retry=RetryPolicy(max_attempts=2, initial=1.0, jitter=False))
    async def handler(firing: Firing) -> None:
        seen.append(ran_as())
        if firing.attempt == 1:
            raise ValueError("no")

    async with engine:
        await engine.schedule("h", delay=1, key="k")
        await clock.advance(1)
        info = engine.get("k")
        assert info is not None and info.state is TimerState.PENDING
        assert info.last_error == "ValueError: no"
        await clock.advance(1)
        await clock.advance(0.01)
        info = engine.get("k")
        assert seen == [path, path] and info is not None and info.state is TimerState.SUCCEEDED


#: What one timer's handler does: return, raise, wait a turn then return or raise, or cancel
#: itself in its first step and then wait (stopped) or return (done).
BEHAVIOURS = ("return", "raise", "wait", "wait-raise", "cancel-wait", "cancel-return")


async def outcomes(path: str, plan: list[str], max_concurrency: int) -> list[tuple[str, int]]:
    engine, clock = engine_on(path, max_concurrency=max_concurrency)

    @engine.handler("h", retry=RetryPolicy(max_attempts=2, initial=1.0, jitter=False))
    async def handler(firing: Firing) -> None:
        what = plan[firing.payload]
        if what.startswith("cancel"):
            await engine.cancel(firing.key)
        if what.endswith("wait") or what == "wait-raise":
            await asyncio.sleep(0)
        if what.endswith("raise") and firing.attempt == 1:
            raise ValueError("no")

    async with engine:
        items = [
            {"handler": "h", "delay": 1, "key": f"k{i}", "payload": i} for i in range(len(plan))
        ]
        await engine.schedule_many(items)
        for _ in range(4):
            await clock.advance(1)
            for _ in range(3):
                await clock.advance(0)
        result = []
        for i in range(len(plan)):
            info = engine.get(f"k{i}")
            assert info is not None
            result.append((info.state.value, info.attempts))
        return result


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(BEHAVIOURS), min_size=1, max_size=12), st.integers(1, 4))
def test_both_paths_end_every_timer_alike(plan: list[str], max_concurrency: int) -> None:
    eager = asyncio.run(outcomes("eager", plan, max_concurrency))
    worker = asyncio.run(outcomes("worker", plan, max_concurrency))
    assert eager == worker
    assert all(state != "RUNNING" for state, _ in eager)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("waits", [False, True])
async def test_a_handler_that_raises_cancelled_error_itself_is_retried(
    path: str, waits: bool
) -> None:
    """Nobody cancelled it: a failed attempt. On a worker it was taken for the engine closing,
    the worker ended and the timer stayed RUNNING for good."""
    engine, clock = engine_on(path)
    seen: list[object] = []

    @engine.handler("h", retry=RetryPolicy(max_attempts=2, initial=1.0, jitter=False))
    async def handler(firing: Firing) -> None:
        seen.append(ran_as())
        if waits:
            await asyncio.sleep(0)
        if firing.attempt == 1:
            raise asyncio.CancelledError

    async with engine:
        await engine.schedule("h", delay=1, key="k")
        for _ in range(3):
            await clock.advance(1)
            await clock.advance(0)
        info = engine.get("k")
        assert info is not None and info.state is TimerState.SUCCEEDED and info.attempts == 2
        assert seen[0] == path
