"""Flow control per handler (``wheel_engine/limits.py``) through the engine, on the virtual clock.

Each test can fail: a cap one too high, a start a tick early, a reordered start, another handler
held back or an attempt charged while waiting shows in the figures asserted.
"""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from pathlib import Path

import pytest

from wheel_engine import Engine, Firing, TimerState
from wheel_engine.events import Event, EventKind
from wheel_engine.testing import VirtualClock


async def test_the_concurrency_cap_is_exact_at_its_peak(tmp_path: Path) -> None:
    clock = VirtualClock()
    engine = Engine(tmp_path / "t.db", clock=clock, max_concurrency=16)
    running = 0
    peak = 0
    done = 0

    @engine.handler("h", concurrency=3)
    async def handler(firing: Firing) -> None:
        nonlocal running, peak, done
        running += 1
        peak = max(peak, running)
        await clock.sleep(1.0)
        running -= 1
        done += 1

    async with engine:
        await engine.schedule_many([{"handler": "h", "delay": 0} for _ in range(10)])
        await clock.advance(0.01)
        assert running == 3
        limits = engine.stats()["limits"]["h"]
        assert (limits["running"], limits["waiting_slot"], limits["waiting_token"]) == (3, 7, 0)
        for _ in range(5):
            await clock.advance(1.0)
        assert done == 10
        assert peak == 3
        assert engine.stats()["limits"]["h"]["running"] == 0


async def test_starts_per_second_stay_within_rate_plus_the_burst() -> None:
    clock = VirtualClock()
    engine = Engine(None, clock=clock)
    starts: list[float] = []

    @engine.handler("h", rate=10, burst=5)
    def handler(firing: Firing) -> None:
        assert firing.fired_at >= firing.due  # never early
        starts.append(clock.time())

    async with engine:
        t0 = clock.time()
        await engine.schedule_many([{"handler": "h", "at": t0} for _ in range(100)])
        for _ in range(300):
            await clock.advance(0.01)
        assert len(starts) == 35  # 5 at once, then one every 0.1 s for 3 s
        seconds = Counter(math.floor(start - t0) for start in starts)
        assert seconds[0] <= 10 + 5
        assert all(count <= 10 + 1 for second, count in seconds.items() if second > 0)
        # No window of one second holds more than rate + burst starts.
        for i, start in enumerate(starts):
            assert sum(1 for s in starts[i:] if s < start + 1.0) <= 15
        stats = engine.stats()
        assert stats["pending"] == 65 and stats["fired"] == 35
        assert all(t.attempts == 0 for t in engine.timers(state="PENDING"))  # waiting is free


async def test_due_order_is_kept_within_a_limited_handler(tmp_path: Path) -> None:
    clock = VirtualClock()
    engine = Engine(tmp_path / "t.db", clock=clock)
    order: list[int] = []

    @engine.handler("h", concurrency=1, rate=50)
    async def handler(firing: Firing) -> None:
        order.append(firing.payload)
        await clock.sleep(0.05)

    async with engine:
        now = clock.time()
        # Scheduled in a scrambled order, due in payload order, some while others wait.
        await engine.schedule_many(
            [{"handler": "h", "at": now + 0.001 * i, "payload": i} for i in (5, 3, 9, 0, 7)]
        )
        await clock.advance(0.02)
        await engine.schedule_many(
            [{"handler": "h", "at": now + 0.001 * i, "payload": i} for i in (8, 1, 6, 2, 4)]
        )
        for _ in range(20):
            await clock.advance(0.1)
        assert order[:1] == [0]
        assert order[1:] == sorted(order[1:])  # all but the one that started before the rest
        assert sorted(order) == list(range(10))


async def test_another_handler_is_not_delayed_by_a_limited_backlog() -> None:
    clock = VirtualClock()
    engine = Engine(None, clock=clock, max_concurrency=8)
    b_lateness: list[float] = []
    a_started = 0

    @engine.handler("a", rate=100)
    async def a(firing: Firing) -> None:
        nonlocal a_started
        a_started += 1

    @engine.handler("b")
    async def b(firing: Firing) -> None:
        b_lateness.append(firing.fired_at - firing.due)

    async with engine:
        now = clock.time()
        await engine.schedule_many([{"handler": "a", "at": now} for _ in range(5000)])
        await engine.schedule_many([{"handler": "b", "at": now + 0.01 * i} for i in range(1, 101)])
        for _ in range(110):
            await clock.advance(0.01)
        assert len(b_lateness) == 100
        assert max(b_lateness) <= 0.002  # within a tick or two, as with nothing else due
        assert a_started <= 100 + 1.1 * 100 + 1  # the burst, then the rate
        assert engine.stats()["limits"]["a"]["waiting_token"] == 5000 - a_started


async def test_an_idle_limited_engine_sleeps_and_a_close_leaves_waiting_timers_pending() -> None:
    clock = VirtualClock()
    engine = Engine(None, clock=clock)
    events: list[Event] = []

    @engine.handler("h", rate=1)
    def handler(firing: Firing) -> None:
        pass

    async with engine:
        engine.on_event(events.append)
        await engine.schedule_many([{"handler": "h", "delay": 0} for _ in range(3)])
        await clock.advance(0)
        assert engine.stats()["fired"] == 1
        assert clock.armed() <= 2  # the wheel's one and the bucket's refill: no polling
        assert sum(1 for e in events if e.kind is EventKind.THROTTLED) == 2
        assert engine.stats()["throttled"] == 2
        await clock.advance(0.999)
        assert engine.stats()["fired"] == 1  # never early
        await clock.advance(0.001)
        assert engine.stats()["fired"] == 2
    assert [t.state for t in engine.timers(state="PENDING")] == [TimerState.PENDING]


async def test_a_cancelled_waiting_timer_never_runs_and_the_line_goes_on() -> None:
    clock = VirtualClock()
    engine = Engine(None, clock=clock)
    ran: list[str] = []

    @engine.handler("h", concurrency=1)
    async def handler(firing: Firing) -> None:
        ran.append(firing.key)
        await clock.sleep(1)

    async with engine:
        for key in ("k0", "k1", "k2"):
            await engine.schedule("h", delay=0, key=key)
        await clock.advance(0.01)
        await engine.cancel("k1")
        for _ in range(4):
            await clock.advance(1)
        assert ran == ["k0", "k2"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"concurrency": 0}, "concurrency"),
        ({"concurrency": 1.5}, "concurrency"),
        ({"concurrency": True}, "concurrency"),
        ({"rate": 0}, "rate"),
        ({"rate": -1}, "rate"),
        ({"rate": float("nan")}, "rate"),
        ({"rate": float("inf")}, "rate"),
        ({"rate": 5, "burst": 0}, "burst"),
        ({"burst": 3}, "burst"),
        ({"concurrency": 1, "limit_scope": "planet"}, "limit_scope"),
        ({"concurrency": 1, "limit_scope": "cluster"}, "PostgreSQL"),
    ],
)
def test_bad_limits_raise_at_registration(options: dict[str, object], message: str) -> None:
    engine = Engine(None)
    with pytest.raises(ValueError, match=message):
        engine.register("h", lambda firing: None, **options)  # type: ignore[arg-type]
    assert "h" not in engine._handlers


def test_the_default_burst_is_the_rate() -> None:
    engine = Engine(None)
    engine.register("a", lambda firing: None, rate=0.5)
    engine.register("b", lambda firing: None, rate=250)
    limits = engine.stats()["limits"]
    assert (limits["a"]["burst"], limits["b"]["burst"]) == (1, 250)


async def test_nothing_changes_for_handlers_without_limits() -> None:
    engine = Engine(None, clock=VirtualClock())
    engine.register("h", lambda firing: None)
    assert engine.stats()["limits"] == {} and engine.stats()["throttled"] == 0
    await asyncio.sleep(0)
