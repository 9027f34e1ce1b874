"""Bursts at bounded concurrency, stats, graceful shutdown."""

from __future__ import annotations

import asyncio

from wheel_engine import Engine, Firing, TimerState
from wheel_engine.testing import VirtualClock


async def test_burst_runs_at_bounded_concurrency_in_order() -> None:
    clock = VirtualClock()
    engine = Engine(None, clock=clock, max_concurrency=8)
    running = 0
    peak = 0
    started: list[int] = []

    @engine.handler("h")
    async def handler(firing: Firing) -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        started.append(firing.payload)
        await clock.sleep(1)
        running -= 1

    async with engine:
        await engine.schedule_many([{"handler": "h", "delay": 5, "payload": i} for i in range(100)])
        await clock.advance(5)
        assert peak == 8 and running == 8
        await clock.advance(20)
        assert running == 0 and peak == 8
        assert started == list(range(100))  # in version order
        assert engine.stats()["succeeded"] == 100


async def test_stats_report_lateness_and_counts() -> None:
    clock = VirtualClock()
    engine = Engine(None, clock=clock)
    engine.register("h", lambda f: None)
    async with engine:
        for i in range(10):
            await engine.schedule("h", delay=i)
        await clock.advance(4.5)
        stats = engine.stats()
        assert stats["fired"] == 5 and stats["succeeded"] == 5 and stats["pending"] == 5
        assert 0.0 <= stats["lag_p50"] <= stats["lag_p99"] <= stats["lag_max"] <= 0.0011
        for key in ("running", "dead", "unhandled", "retried", "canceled", "journal_records"):
            assert key in stats


async def test_close_drains_within_grace_and_leaves_the_rest_unacknowledged() -> None:
    clock = VirtualClock()
    engine = Engine(None, clock=clock)
    finished: list[str] = []
    cancelled: list[str] = []

    @engine.handler("h")
    async def handler(firing: Firing) -> None:
        try:
            await clock.sleep(firing.payload)
            finished.append(firing.key)
        except asyncio.CancelledError:
            cancelled.append(firing.key)
            raise

    await engine.start()
    await engine.schedule("h", delay=0, key="quick", payload=1)
    await engine.schedule("h", delay=0, key="slow", payload=100)
    await engine.schedule("h", delay=50, key="later", payload=1)
    await clock.advance(0.01)
    closing = asyncio.ensure_future(engine.close(grace=5))
    await clock.advance(10)
    await closing
    assert finished == ["quick"] and cancelled == ["slow"]
    assert engine.get("slow").state is TimerState.RUNNING  # type: ignore[union-attr]  # not acked
    assert engine.get("later").state is TimerState.PENDING  # type: ignore[union-attr]
    await clock.advance(100)
    assert finished == ["quick"]  # nothing fires after close


async def test_signal_handlers_close_the_engine() -> None:
    import os
    import signal

    engine = Engine(None)
    async with engine:
        engine.install_signal_handlers(grace=0.1)
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.wait_for(engine.wait_closed(), timeout=5)
    loop = asyncio.get_running_loop()
    loop.remove_signal_handler(signal.SIGTERM)
    loop.remove_signal_handler(signal.SIGINT)


async def test_close_does_not_wait_for_firings_no_worker_started() -> None:
    clock = VirtualClock()
    engine = Engine(None, clock=clock, max_concurrency=1)
    started: list[str] = []

    @engine.handler("h")
    async def handler(firing: Firing) -> None:
        started.append(firing.key)
        await clock.sleep(1)

    await engine.start()
    await engine.schedule_many([{"handler": "h", "delay": 0, "key": f"k{i}"} for i in range(5)])
    await clock.advance(0.01)
    assert started == ["k0"]  # one worker: the other four wait in the ready queue
    t0 = clock.time()
    closing = asyncio.ensure_future(engine.close(grace=30))
    await clock.advance(1)  # k0 finishes after 1 s; the queued four must not be started
    finished_early = closing.done()
    await clock.advance(30)  # (lets a wrong close() run out its grace instead of hanging)
    await closing
    assert finished_early and started == ["k0"] and clock.time() - t0 >= 1
    assert engine.get("k0").state is TimerState.SUCCEEDED  # type: ignore[union-attr]
    queued = engine.get("k4")  # never started: still PENDING, and not charged an attempt
    assert queued is not None and queued.state is TimerState.PENDING and queued.attempts == 0
