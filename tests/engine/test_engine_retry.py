"""Failed attempts: backoff between attempts, the cap, the deadline, PermanentError, timeouts,
dead-letter and redrive."""

from __future__ import annotations

import itertools

import pytest

from wheel_engine import Engine, EngineError, Firing, PermanentError, RetryPolicy, TimerState
from wheel_engine.testing import VirtualClock


async def test_retries_with_exponential_backoff_then_dead() -> None:
    clock = VirtualClock()
    engine = Engine(None, clock=clock)
    times: list[float] = []
    policy = RetryPolicy(max_attempts=4, initial=1.0, multiplier=2.0, max_delay=3.0, jitter=False)

    @engine.handler("flaky", retry=policy)
    async def flaky(firing: Firing) -> None:
        times.append(firing.fired_at)
        assert firing.attempt == len(times)
        raise RuntimeError("downstream down")

    async with engine:
        info = await engine.schedule("flaky", delay=0, key="k")
        await clock.advance(100)
        gaps = [round(b - a, 2) for a, b in itertools.pairwise(times)]
        assert gaps == [1.0, 2.0, 3.0]  # 1, 2, then capped at max_delay
        final = engine.get("k")
        assert final is not None and final.state is TimerState.DEAD
        assert final.attempts == 4 and final.version == info.version
        assert final.last_error == "RuntimeError: downstream down"
        stats = engine.stats()
        assert stats["retried"] == 3 and stats["dead"] == 1


async def test_jitter_stays_within_the_backoff_bound() -> None:
    policy = RetryPolicy(max_attempts=10, initial=1.0, multiplier=2.0, max_delay=60, jitter=True)
    delays = [policy.next_delay(3, first_attempt_at=0.0, now=0.0) for _ in range(500)]
    assert all(d is not None and 0.0 <= d <= 4.0 for d in delays)
    assert len({round(d or 0, 3) for d in delays}) > 100  # really spread


async def test_deadline_ends_retries() -> None:
    clock = VirtualClock()
    engine = Engine(None, clock=clock)
    attempts: list[int] = []
    policy = RetryPolicy(max_attempts=100, initial=10, multiplier=1, jitter=False, deadline=25)

    @engine.handler("h", retry=policy)
    async def handler(firing: Firing) -> None:
        attempts.append(firing.attempt)
        raise RuntimeError("no")

    async with engine:
        await engine.schedule("h", delay=0, key="k")
        await clock.advance(1000)
        assert attempts == [1, 2, 3]  # at 0, 10, 20; a 4th at 30 would pass the deadline
        assert engine.get("k").state is TimerState.DEAD  # type: ignore[union-attr]


async def test_permanent_error_is_dead_at_once() -> None:
    clock = VirtualClock()
    engine = Engine(None, clock=clock)
    calls = []

    class BadOrder(PermanentError):
        pass

    @engine.handler("h", retry=RetryPolicy(max_attempts=5))
    async def handler(firing: Firing) -> None:
        calls.append(firing.attempt)
        raise BadOrder("order does not exist")

    async with engine:
        await engine.schedule("h", delay=0, key="k")
        await clock.advance(1000)
        assert calls == [1]
        info = engine.get("k")
        assert info is not None and info.state is TimerState.DEAD
        assert info.last_error == "BadOrder: order does not exist"


async def test_timeout_is_a_failed_attempt() -> None:
    clock = VirtualClock()
    engine = Engine(None, clock=clock)
    starts: list[float] = []

    @engine.handler("slow", timeout=5, retry=RetryPolicy(max_attempts=2, initial=1, jitter=False))
    async def slow(firing: Firing) -> None:
        starts.append(clock.time())
        await clock.sleep(60)

    async with engine:
        t0 = clock.time()
        await engine.schedule("slow", delay=0, key="k")
        await clock.advance(100)
        assert [round(s - t0, 2) for s in starts] == [0.0, 6.0]  # 5 s timeout + 1 s backoff
        info = engine.get("k")
        assert info is not None and info.state is TimerState.DEAD
        assert info.last_error is not None and "timed out" in info.last_error


async def test_redrive_dead_timer() -> None:
    clock = VirtualClock()
    engine = Engine(None, clock=clock)
    healthy = False
    calls: list[tuple[int, int]] = []

    @engine.handler("h", retry=RetryPolicy(max_attempts=1))
    async def handler(firing: Firing) -> None:
        calls.append((firing.version, firing.attempt))
        if not healthy:
            raise RuntimeError("down")

    async with engine:
        first = await engine.schedule("h", delay=0, key="k")
        await clock.advance(1)
        assert engine.get("k").state is TimerState.DEAD  # type: ignore[union-attr]
        assert engine.stats()["dead"] == 1
        healthy = True
        again = await engine.redrive("k", at=clock.time() + 5)
        assert (engine.stats()["dead"], engine.stats()["pending"]) == (0, 1)
        assert again.state is TimerState.PENDING and again.attempts == 0
        assert again.version > first.version
        await clock.advance(4)
        assert len(calls) == 1
        await clock.advance(2)
        assert calls[-1] == (again.version, 1)
        assert engine.get("k").state is TimerState.SUCCEEDED  # type: ignore[union-attr]
        with pytest.raises(EngineError):
            await engine.redrive("k")
        with pytest.raises(KeyError):
            await engine.redrive("missing")
