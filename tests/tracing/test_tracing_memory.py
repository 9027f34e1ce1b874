"""Tracing in memory and on SQLite, on the virtual clock: the scheduling span, the attempt
spans linked to it, retries, DEAD, a cancel-requested attempt, a redrive, a handler's own span
nested under its attempt, and the journal record that carries the context."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.trace import SpanKind, StatusCode

from wheel_engine import Engine, Firing, RetryPolicy
from wheel_engine.testing import VirtualClock

NO_RETRY = RetryPolicy(max_attempts=1)
TWO_TRIES = RetryPolicy(max_attempts=2, initial=1.0, jitter=False)


def by_name(spans: Any, name: str) -> list[Any]:
    return [s for s in spans.get_finished_spans() if s.name == name]


@pytest.mark.parametrize("durable", [False, True])
async def test_attempt_links_to_the_scheduling_span(
    spans: Any, tmp_path: Path, durable: bool
) -> None:
    clock = VirtualClock()
    engine = Engine(str(tmp_path / "j.db") if durable else None, clock=clock)
    inner: list[Any] = []
    tracer = trace.get_tracer("app")

    @engine.handler("send")
    async def send(firing: Firing) -> None:
        with tracer.start_as_current_span("handler work") as span:
            inner.append(span)

    async with engine:
        with tracer.start_as_current_span("request") as request:
            await engine.schedule("send", delay=10, key="k")
        await clock.advance(15)
    (produced,) = by_name(spans, "schedule send")
    assert produced.kind is SpanKind.PRODUCER
    assert produced.parent.span_id == request.get_span_context().span_id
    (fired,) = by_name(spans, "fire send")
    assert fired.kind is SpanKind.CONSUMER
    assert fired.parent is None  # a root: linked, not a child of the long-gone request
    assert [link.context.span_id for link in fired.links] == [produced.context.span_id]
    assert fired.attributes["messaging.system"] == "wheel-engine"
    assert fired.attributes["messaging.operation.type"] == "process"
    assert fired.attributes["wheel_engine.timer.key"] == "k"
    assert fired.attributes["wheel_engine.attempt"] == 1
    assert fired.attributes["wheel_engine.lateness"] >= 0
    assert fired.attributes["wheel_engine.outcome"] == "succeeded"
    (work,) = by_name(spans, "handler work")
    assert work.parent.span_id == fired.context.span_id  # the handler's span nests
    if durable:
        con = sqlite3.connect(tmp_path / "j.db")
        blob = con.execute("SELECT body FROM records WHERE kind = 1").fetchone()[0]
        assert format(produced.context.trace_id, "032x").encode() in blob


async def test_plain_handler_runs_inside_its_attempt_span(spans: Any) -> None:
    clock = VirtualClock()
    engine = Engine(None, clock=clock)
    seen: list[Any] = []
    engine.register("plain", lambda firing: seen.append(trace.get_current_span()))
    async with engine:
        await engine.schedule("plain", delay=1)
        await clock.advance(2)
    (fired,) = by_name(spans, "fire plain")
    assert seen[0].get_span_context().span_id == fired.context.span_id


async def test_retry_two_spans_the_first_in_error(spans: Any) -> None:
    clock = VirtualClock()
    engine = Engine(None, clock=clock)
    calls = 0

    @engine.handler("flaky", retry=TWO_TRIES)
    async def flaky(firing: Firing) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("secret-payload-text")

    async with engine:
        await engine.schedule("flaky", delay=0, key="k")
        await clock.advance(5)
    first, second = sorted(
        by_name(spans, "fire flaky"), key=lambda s: s.attributes["wheel_engine.attempt"]
    )
    assert first.status.status_code is StatusCode.ERROR
    assert first.attributes["wheel_engine.outcome"] == "retry"
    assert first.attributes["error.type"] == "RuntimeError"
    assert second.status.status_code is StatusCode.UNSET
    assert second.attributes["wheel_engine.outcome"] == "succeeded"
    assert first.links[0].context.span_id == second.links[0].context.span_id


async def test_dead_timer_span_has_the_described_error(spans: Any) -> None:
    clock = VirtualClock()
    engine = Engine(None, clock=clock)

    def describe(exc: BaseException) -> str:
        return "downstream refused"

    @engine.handler("bad", retry=NO_RETRY, describe_error=describe)
    async def bad(firing: Firing) -> None:
        raise ValueError("card 4111-1111")

    async with engine:
        await engine.schedule("bad", delay=0)
        await clock.advance(1)
    (fired,) = by_name(spans, "fire bad")
    assert fired.attributes["wheel_engine.outcome"] == "dead"
    assert fired.status.status_code is StatusCode.ERROR
    assert "downstream refused" in fired.status.description
    assert "4111" not in str(fired.status.description)


async def test_cancel_requested_attempt(spans: Any) -> None:
    clock = VirtualClock()
    engine = Engine(None, clock=clock)
    started = asyncio.Event()

    @engine.handler("slow")
    async def slow(firing: Firing) -> None:
        started.set()
        await asyncio.Event().wait()

    async with engine:
        await engine.schedule("slow", delay=0, key="k")
        await clock.advance(0)
        await started.wait()
        await engine.cancel("k")
        await clock.advance(1)
    (fired,) = by_name(spans, "fire slow")
    assert fired.attributes["wheel_engine.outcome"] == "canceled"
    assert fired.status.status_code is not StatusCode.ERROR


async def test_redrive_links_to_the_redrivers_context(spans: Any) -> None:
    clock = VirtualClock()
    engine = Engine(None, clock=clock)
    tries = 0

    @engine.handler("once", retry=NO_RETRY)
    async def once(firing: Firing) -> None:
        nonlocal tries
        tries += 1
        if tries == 1:
            raise RuntimeError("no")

    tracer = trace.get_tracer("app")
    async with engine:
        await engine.schedule("once", delay=0, key="k")
        await clock.advance(1)
        with tracer.start_as_current_span("operator"):
            await engine.redrive("k")
        await clock.advance(1)
    (redrive,) = by_name(spans, "redrive once")
    second = [
        s
        for s in by_name(spans, "fire once")
        if s.attributes["wheel_engine.outcome"] == "succeeded"
    ]
    assert second[0].links[0].context.span_id == redrive.context.span_id


async def test_schedule_many_one_producer_span(spans: Any) -> None:
    clock = VirtualClock()
    engine = Engine(None, clock=clock)
    engine.register("h", lambda firing: None)
    async with engine:
        await engine.schedule_many([{"handler": "h", "delay": 1}, {"handler": "h", "delay": 2}])
        await clock.advance(3)
    (produced,) = by_name(spans, "schedule h")
    assert produced.attributes["messaging.batch.message_count"] == 2
    fired = by_name(spans, "fire h")
    assert len(fired) == 2
    assert {f.links[0].context.span_id for f in fired} == {produced.context.span_id}


async def test_no_provider_nothing_runs_and_nothing_is_stored(tmp_path: Path) -> None:
    """Without a provider set (no ``spans`` fixture) the engine is untraced: its calls are the
    methods themselves and each schedule record holds its six fields, no byte more."""
    from journal.codec import unpack

    clock = VirtualClock()
    engine = Engine(str(tmp_path / "j.db"), clock=clock)
    engine.register("h", lambda firing: None)
    async with engine:
        assert "schedule" not in vars(engine)
        assert engine._scheduler.tracing is None
        await engine.schedule("h", delay=1, key="k")
    con = sqlite3.connect(tmp_path / "j.db")
    blob = con.execute("SELECT body FROM records WHERE kind = 1").fetchone()[0]
    assert len(unpack(blob)[0]) == 6
