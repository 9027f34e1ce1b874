"""Recurring occurrences link to the call that created the recurrence: in memory, on SQLite,
after a restart (the context read back from the recurrence's record in the journal), with the
handler registered before or after the engine started; one attempt span per occurrence."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace

from wheel_engine import Engine, Firing
from wheel_engine.recurring.records import rule_key
from wheel_engine.testing import VirtualClock

T0 = 1_767_225_600.0  # VirtualClock's start


def by_name(spans: Any, name: str) -> list[Any]:
    return [s for s in spans.get_finished_spans() if s.name == name]


def make(path: Path | None, clock: VirtualClock, seen: list[Any]) -> Engine:
    engine = Engine(path, clock=clock, clock_check=None)

    async def sweep(firing: Firing) -> None:
        seen.append(trace.get_current_span().get_span_context().span_id)

    engine.register("sweep", sweep)
    return engine


def occurrences(spans: Any) -> list[Any]:
    fired = by_name(spans, "fire recurring:sweep")
    return sorted(fired, key=lambda s: s.attributes["wheel_engine.timer.key"])


@pytest.mark.parametrize("durable", [False, True])
async def test_every_occurrence_links_to_the_creator(
    spans: Any, tmp_path: Path, durable: bool
) -> None:
    clock, seen = VirtualClock(), []
    engine = make(tmp_path / "j.db" if durable else None, clock, seen)
    async with engine:
        with trace.get_tracer("app").start_as_current_span("request") as request:
            await engine.schedule_recurring("s", "sweep", every=60)
        await clock.advance(60 * 3 + 1)
    (created,) = by_name(spans, "schedule_recurring sweep")
    assert created.kind is trace.SpanKind.PRODUCER
    assert created.parent.span_id == request.get_span_context().span_id
    fired = occurrences(spans)
    assert len(fired) == 3  # one span per attempt (the user's handler runs inside it)
    assert [f.attributes["wheel_engine.outcome"] for f in fired] == ["succeeded"] * 3
    for attempt in fired:  # not the occurrence before, which committed it
        assert [link.context.span_id for link in attempt.links] == [created.context.span_id]
    assert seen == [f.context.span_id for f in fired]


async def test_the_link_survives_a_restart(spans: Any, tmp_path: Path) -> None:
    db, seen = tmp_path / "j.db", []
    first = make(db, VirtualClock(), seen)
    async with first:
        await first.schedule_recurring("s", "sweep", every=60)
        await first.compact()  # the record outlives its journal record: a snapshot row
    (created,) = by_name(spans, "schedule_recurring sweep")
    clock = VirtualClock(T0 + 1)
    again = make(db, clock, seen)
    async with again:
        await clock.advance(60 * 3)
    fired = occurrences(spans)
    assert len(fired) == 3
    for attempt in fired:
        assert [link.context.span_id for link in attempt.links] == [created.context.span_id]


async def test_a_handler_registered_after_start(spans: Any) -> None:
    clock = VirtualClock()
    engine = Engine(None, clock=clock, clock_check=None)
    async with engine:
        engine.register("sweep", lambda firing: None)
        await engine.schedule_recurring("s", "sweep", every=60)
        await clock.advance(60 * 2 + 1)
    (created,) = by_name(spans, "schedule_recurring sweep")
    fired = occurrences(spans)
    assert len(fired) == 2
    assert {link.context.span_id for f in fired for link in f.links} == {created.context.span_id}


async def test_untraced_record_holds_no_context(tmp_path: Path) -> None:
    """Without a provider the recurrence's record is what it was before tracing."""
    clock = VirtualClock()
    engine = make(tmp_path / "j.db", clock, [])
    async with engine:
        await engine.schedule_recurring("s", "sweep", every=60)
        record = engine.get(rule_key("s"))
    assert record is not None and "trace" not in record.payload
