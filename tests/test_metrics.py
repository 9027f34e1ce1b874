"""wheel_engine.metrics: gauges and counters from stats(), commit histograms, timed handlers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from wheel_engine import Engine, Firing, PermanentError, RetryPolicy
from wheel_engine.metrics import instrument
from wheel_engine.testing import VirtualClock


def value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


async def test_gauges_and_counters_follow_the_engine(tmp_path: Path) -> None:
    clock = VirtualClock()
    engine = Engine(str(tmp_path / "t.db"), clock=clock)
    registry = CollectorRegistry()
    metrics = instrument(engine, registry)  # before start: hooked at the first scrape

    @engine.handler("ok")
    @metrics.timed
    async def ok(firing: Firing) -> None:
        pass

    @engine.handler("bad", retry=RetryPolicy(max_attempts=2, initial=1.0, jitter=False))
    @metrics.timed
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
        assert value(registry, "wheel_engine_lateness_seconds", quantile="0.99") is not None

        # Per-handler histograms from the timed wrapper.
        assert value(registry, "wheel_engine_firing_lateness_seconds_count", handler="ok") == 2
        assert value(registry, "wheel_engine_handler_seconds_count", handler="bad", outcome="error")
        assert value(registry, "wheel_engine_handler_seconds_count", handler="ok", outcome="ok")

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
