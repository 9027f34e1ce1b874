"""A journal written before tracing, read by a traced engine: its timers (six-field records,
then snapshot rows without the trace field) fire next to traced ones, unlinked, in the engine
that recovered them and again after a restart; the traced ones keep their link."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from opentelemetry import trace

from journal.codec import unpack
from wheel_engine import Engine
from wheel_engine.testing import VirtualClock

T0 = 1_767_225_600.0  # VirtualClock's start


def engine(db: Path, clock: VirtualClock) -> Engine:
    e = Engine(str(db), clock=clock, clock_check=None)
    e.register("h", lambda firing: None)
    return e


def links_of(spans: Any) -> dict[str, list[int]]:
    return {
        s.attributes["wheel_engine.timer.key"]: [link.context.span_id for link in s.links]
        for s in spans.get_finished_spans()
        if s.name == "fire h"
    }


async def test_untraced_records_fire_unlinked_beside_traced_ones(
    spans: Any, untraced: Any, tmp_path: Path
) -> None:
    db = tmp_path / "j.db"
    with untraced():
        old = engine(db, VirtualClock())
        async with old:
            await old.schedule("h", delay=10, key="old-soon")
            await old.schedule("h", delay=100, key="old-late")
    con = sqlite3.connect(db)
    bodies = [row[0] for row in con.execute("SELECT body FROM records WHERE kind = 1")]
    con.close()
    assert [len(unpack(body)[0]) for body in bodies] == [6, 6]  # the shape before tracing

    clock = VirtualClock()
    first = engine(db, clock)
    async with first:  # recovers the six-field records
        with trace.get_tracer("app").start_as_current_span("request"):
            await first.schedule("h", delay=10, key="new-soon")
            await first.schedule("h", delay=100, key="new-late")
        await clock.advance(20)
        await first.compact()  # the late ones go on as snapshot rows, one with, one without
    produced = {
        s.attributes["wheel_engine.timer.key"]: s.context.span_id
        for s in spans.get_finished_spans()
        if s.name == "schedule h"
    }
    assert links_of(spans) == {"old-soon": [], "new-soon": [produced["new-soon"]]}

    clock = VirtualClock(T0 + 20)
    again = engine(db, clock)
    async with again:
        await clock.advance(100)
    assert links_of(spans) == {
        "old-soon": [],
        "new-soon": [produced["new-soon"]],
        "old-late": [],
        "new-late": [produced["new-late"]],
    }
