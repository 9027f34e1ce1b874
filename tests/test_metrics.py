"""wheel_engine.metrics: gauges and counters from stats(), commit histograms, and the lateness and
handler-duration histograms fed by events (driven here through an EventBus of the test's own)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from wheel_engine import Engine, Firing, PermanentError, RetryPolicy
from wheel_engine.events import EventBus
from wheel_engine.metrics import LATENESS_BUCKETS, EngineMetrics, instrument
from wheel_engine.testing import VirtualClock
from wheel_engine.timer import Timer


def value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


async def test_gauges_and_counters_follow_the_engine(tmp_path: Path) -> None:
    clock = VirtualClock()
    engine = Engine(str(tmp_path / "t.db"), clock=clock)
    registry = CollectorRegistry()
    metrics = instrument(engine, registry)  # before start: hooked at the first scrape

    @engine.handler("ok")
    async def ok(firing: Firing) -> None:
        pass

    @engine.handler("bad", retry=RetryPolicy(max_attempts=2, initial=1.0, jitter=False))
    def bad(firing: Firing) -> None:
        raise PermanentError("no") if firing.payload == "perm" else ValueError("flaky")

    async with engine:
        assert value(registry, "wheel_engine_timers", state="pending") == 0
        await engine.schedule("ok", delay=1, key="a")
        await engine.schedule("ok", delay=2, key="b")
        await engine.schedule("ok", delay=100, key="c")
        await engine.schedule("bad", delay=1, key="d", payload="perm")
        await engine.schedule("bad", delay=1, key="e", payload="retry")
        await engine.cancel("c")
        assert value(registry, "wheel_engine_timers", state="pending") == 4
        assert value(registry, "wheel_engine_canceled_total") == 1
        await clock.advance(5)
        assert value(registry, "wheel_engine_timers", state="pending") == 0
        assert value(registry, "wheel_engine_timers", state="dead") == 2
        assert value(registry, "wheel_engine_fired_total") == 5  # a, b, d, e twice
        assert value(registry, "wheel_engine_succeeded_total") == 2
        assert value(registry, "wheel_engine_retried_total") == 1
        assert value(registry, "wheel_engine_dead_total") == 2
        assert value(registry, "wheel_engine_unhandled_timers") == 0
        assert value(registry, "wheel_engine_lateness_max_seconds") is not None
        assert value(registry, "wheel_engine_lateness_seconds", quantile="0.99") is None

        await engine.redrive("d")
        assert value(registry, "wheel_engine_redriven_total") == 1
        # The journal's commits, hooked at the first scrape after start.
        commits = value(registry, "wheel_engine_journal_commit_batch_size_count")
        assert commits is not None and commits > 0
        batch_sum = value(registry, "wheel_engine_journal_commit_batch_size_sum")
        assert batch_sum is not None and batch_sum >= commits
        assert (value(registry, "wheel_engine_journal_commit_seconds_sum") or 0) > 0

    text = generate_latest(registry).decode()
    assert "# TYPE wheel_engine_fired_total counter" in text
    assert "# TYPE wheel_engine_journal_commit_seconds histogram" in text
    assert "# TYPE wheel_engine_firing_lateness_seconds histogram" in text
    assert "quantile=" not in text  # histograms aggregate across processes; quantile gauges do not
    metrics.unregister()
    assert value(registry, "wheel_engine_fired_total") is None


async def test_hooks_a_started_engine_at_once_and_keeps_an_existing_hook(tmp_path: Path) -> None:
    engine = Engine(str(tmp_path / "t.db"), clock=VirtualClock())
    engine.register("h", lambda firing: None)
    seen: list[int] = []
    async with engine:
        assert engine.journal is not None
        engine.journal.on_commit = lambda batch, seconds: seen.append(batch)
        registry = CollectorRegistry()
        metrics = instrument(engine, registry)
        await engine.schedule("h", delay=10)
        assert seen and seen[-1] >= 1
        assert value(registry, "wheel_engine_journal_commit_batch_size_count") == len(seen)
        metrics.unregister()
        await engine.schedule("h", delay=10)
        assert value(registry, "wheel_engine_journal_commit_batch_size_count") is None
        assert len(seen) == 2  # the original hook is back in place


async def test_in_memory_engine_and_duplicate_registration() -> None:
    engine = Engine(None, clock=VirtualClock())
    registry = CollectorRegistry()
    instrument(engine, registry)
    async with engine:
        assert value(registry, "wheel_engine_journal_records") == 0
        assert value(registry, "wheel_engine_journal_commit_batch_size_count") == 0
    with pytest.raises(ValueError, match="Duplicated"):
        instrument(engine, registry)
    instrument(engine, registry, prefix="other")
    assert value(registry, "other_fired_total") == 0


def test_clear_error_without_prometheus_client() -> None:
    code = (
        "import sys; sys.modules['prometheus_client'] = None\n"
        "try:\n    import wheel_engine.metrics\nexcept ImportError as e:\n    print(e)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert "pip install 'wheel-engine[metrics]'" in done.stdout


def bus_metrics(registry: CollectorRegistry) -> tuple[EventBus, EngineMetrics]:
    bus = EventBus()
    engine = Engine(None, clock=VirtualClock())
    return bus, EngineMetrics(engine, registry, subscribe=bus.subscribe)


def fired(bus: EventBus, handler: str, due: float, at: float, attempts: int = 1) -> Timer:
    timer = Timer("k", 1, handler, due, None)
    timer.attempts = attempts
    bus.fired(timer, at)
    return timer


def test_lateness_is_a_histogram_per_handler() -> None:
    registry = CollectorRegistry()
    bus, metrics = bus_metrics(registry)
    fired(bus, "a", 100.0, 100.0004)  # in the first bucket (0.5 ms)
    fired(bus, "a", 100.0, 100.3)
    fired(bus, "a", 100.0, 175.0)  # past the last bound: +Inf only
    fired(bus, "b", 100.0, 100.002)
    fired(bus, "b", 100.0, 99.9999)  # float rounding of a tick: counted as 0, never negative
    lateness = "wheel_engine_firing_lateness_seconds"
    assert value(registry, f"{lateness}_count", handler="a") == 3
    assert value(registry, f"{lateness}_bucket", handler="a", le="0.0005") == 1
    assert value(registry, f"{lateness}_bucket", handler="a", le="0.5") == 2
    assert value(registry, f"{lateness}_bucket", handler="a", le="60.0") == 2
    assert value(registry, f"{lateness}_bucket", handler="a", le="+Inf") == 3
    assert value(registry, f"{lateness}_sum", handler="a") == pytest.approx(75.3004)
    assert value(registry, f"{lateness}_count", handler="b") == 2
    assert value(registry, f"{lateness}_sum", handler="b") == pytest.approx(0.002)
    assert value(registry, f"{lateness}_bucket", handler="b", le="0.0005") == 1
    bounds = [float(b) for b in LATENESS_BUCKETS]
    assert bounds == sorted(bounds) and bounds[0] < 0.001 <= bounds[1]  # a tick is resolved
    metrics.unregister()
    fired(bus, "a", 100.0, 100.1)
    assert not bus.active and value(registry, f"{lateness}_count", handler="a") is None


def test_handler_seconds_by_outcome_only_for_attempts_that_ran() -> None:
    registry = CollectorRegistry()
    bus, _ = bus_metrics(registry)
    timer = fired(bus, "h", 100.0, 100.0)
    bus.succeeded(timer, 100.2, 0.2)
    bus.retry(timer, 101.0, 0.05, 102.0, "ValueError")
    bus.dead(timer, 103.0, 1.5, "ValueError")
    bus.dead(timer, 104.0, None, "attempt 3 was interrupted")  # no handler ran: not observed
    bus.canceled(timer, 105.0, 30.0)
    bus.canceled(timer, 106.0)  # cancelled while pending: nothing ran
    bus.scheduled(timer, 107.0)
    bus.redriven(timer, 108.0)
    seconds = "wheel_engine_handler_seconds"
    counts = {
        outcome: value(registry, f"{seconds}_count", handler="h", outcome=outcome)
        for outcome in ("succeeded", "retry", "dead", "canceled")
    }
    assert counts == {"succeeded": 1, "retry": 1, "dead": 1, "canceled": 1}
    assert value(registry, f"{seconds}_sum", handler="h", outcome="dead") == 1.5
    assert value(registry, f"{seconds}_bucket", handler="h", outcome="canceled", le="10.0") == 0
    assert value(registry, f"{seconds}_bucket", handler="h", outcome="canceled", le="30.0") == 1
    assert value(registry, "wheel_engine_firing_lateness_seconds_count", handler="h") == 1


def test_an_engine_that_emits_no_event_still_exports_stats() -> None:
    """``instrument`` on an engine whose ``on_event`` never calls back: the stats, no handler
    histograms (metrics subscribe through ``engine.on_event`` and read ``stats()``, no more)."""

    class Bare:
        journal = None

        def stats(self) -> dict[str, int]:
            return {"fired": 4}

        def on_event(self, callback: object) -> Callable[[], None]:
            return lambda: None

    registry = CollectorRegistry()
    instrument(Bare(), registry)  # type: ignore[arg-type]
    assert value(registry, "wheel_engine_fired_total") == 4
    assert value(registry, "wheel_engine_firing_lateness_seconds_count", handler="h") is None


async def test_the_engine_feeds_the_histograms(tmp_path: Path) -> None:
    clock = VirtualClock()
    engine = Engine(str(tmp_path / "t.db"), clock=clock)
    registry = CollectorRegistry()
    metrics = instrument(engine, registry)

    @engine.handler("ok")
    async def ok(firing: Firing) -> None:
        await clock.sleep(0.2)

    @engine.handler("bad", retry=RetryPolicy(max_attempts=2, initial=1.0, jitter=False))
    def bad(firing: Firing) -> None:
        raise ValueError("flaky")

    async with engine:
        await engine.schedule("ok", delay=1)
        await engine.schedule("ok", delay=2)
        await engine.schedule("bad", delay=1)
        await clock.advance(5)
    lateness = "wheel_engine_firing_lateness_seconds_count"
    assert value(registry, lateness, handler="ok") == 2
    assert value(registry, lateness, handler="bad") == 2
    seconds = "wheel_engine_handler_seconds"
    assert value(registry, f"{seconds}_count", handler="ok", outcome="succeeded") == 2
    assert value(registry, f"{seconds}_sum", handler="ok", outcome="succeeded") == pytest.approx(
        0.4
    )
    assert value(registry, f"{seconds}_count", handler="bad", outcome="retry") == 1
    assert value(registry, f"{seconds}_count", handler="bad", outcome="dead") == 1
    metrics.unregister()
