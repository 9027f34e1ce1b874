"""A limited handler's figures in the Prometheus metrics (``wheel_engine.metrics``)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from wheel_engine import Engine, Firing
from wheel_engine.metrics import instrument
from wheel_engine.testing import VirtualClock


async def test_waiting_running_and_throttled_are_exported_per_handler() -> None:
    clock = VirtualClock()
    engine = Engine(None, clock=clock)

    @engine.handler("slow", concurrency=2)
    async def slow(firing: Firing) -> None:
        await clock.sleep(10)

    registry = CollectorRegistry()
    instrument(engine, registry=registry)
    async with engine:
        await engine.schedule_many([{"handler": "slow", "delay": 0} for _ in range(5)])
        await clock.advance(0.01)
        text = generate_latest(registry).decode()
        assert 'wheel_engine_handler_running{handler="slow"} 2.0' in text
        assert 'wheel_engine_handler_waiting{handler="slow",reason="slot"} 3.0' in text
        assert 'wheel_engine_handler_waiting{handler="slow",reason="token"} 0.0' in text
        assert 'wheel_engine_handler_waiting{handler="slow",reason="row"} 0.0' in text
        assert 'wheel_engine_handler_throttled_total{handler="slow"} 3.0' in text
        await engine.close(grace=0)
