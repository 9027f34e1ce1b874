"""Tracing on PostgreSQL: a timer scheduled on one node and fired on another links to the first
node's scheduling span, the context travelling in the row's ``trace`` column; rows written
before that column existed (schema 1) fire unlinked beside traced ones, before and after a
restart. Real time and short leases, as tests/nodes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest
from opentelemetry import trace
from pg_cluster import REQUIRED, sql

from wheel_engine import Engine, Firing, RetryPolicy

if not REQUIRED:
    pytest.importorskip("psycopg")

from journal.postgres import SCHEMA_VERSION, Outcome, PostgresStore, partition_of
from journal.postgres.schema import _V1, _initial_rows

pytestmark = pytest.mark.slow

PARTITIONS = 64


def node(url: str, name: str, fired: dict[str, str]) -> Engine:
    engine = Engine(url, node=name, lease=1.5, horizon=60.0)

    def h(firing: Firing) -> None:
        fired[firing.key] = name

    engine.register("h", h)
    return engine


async def dead_in_the_database(engine: Engine, key: str) -> None:
    """Until ``key`` is DEAD in the database: the node that ran it shows DEAD in its own view
    before its outcome is committed, and another node's redrive reads the database."""
    while (info := await engine.lookup(key)) is None or info.state.name != "DEAD":
        await asyncio.sleep(0.01)


async def until(condition: Callable[[], bool], patience: float = 15.0) -> None:
    deadline = time.monotonic() + patience
    while not condition():
        assert time.monotonic() < deadline, f"condition not met within {patience} s"
        await asyncio.sleep(0.02)


def owned(engine: Engine) -> list[int]:
    return list(engine.stats()["partitions"])


def key_in(partitions: list[int], prefix: str) -> str:
    return next(
        key
        for key in (f"{prefix}{n}" for n in range(10_000))
        if partition_of(key, PARTITIONS) in partitions
    )


def fire_spans(spans: Any) -> dict[str, Any]:
    return {
        s.attributes["wheel_engine.timer.key"]: s
        for s in spans.get_finished_spans()
        if s.name == "fire h"
    }


def produced(spans: Any) -> dict[str | None, int]:
    return {
        s.attributes.get("wheel_engine.timer.key"): s.context.span_id
        for s in spans.get_finished_spans()
        if s.name == "schedule h"
    }


def traceparent(span_id: int, trace_id: int) -> str:
    """A W3C traceparent's version, trace id and span id (the flags follow)."""
    return f"00-{trace_id:032x}-{span_id:016x}-"


async def test_scheduled_on_one_node_fired_on_another(spans: Any, pg_url: str) -> None:
    """Both engines run in this process, under the one tracer provider, but they share no
    memory: node b's timer is built from the row it reads back from the database (through the
    change feed or its loader), so b's link can only come from the ``trace`` column a wrote
    (checked in the database as well)."""
    fired: dict[str, str] = {}
    a, b = node(pg_url, "a", fired), node(pg_url, "b", fired)
    async with a, b:
        await until(lambda: len(owned(a)) == 32 and len(owned(b)) == 32)
        key = key_in(owned(b), "k")
        with trace.get_tracer("app").start_as_current_span("request"):
            await a.schedule("h", delay=0.3, key=key)
        await until(lambda: key in fire_spans(spans))
    assert fired == {key: "b"}
    (scheduling,) = [s for s in spans.get_finished_spans() if s.name == "schedule h"]
    context = scheduling.context
    ((stored,),) = sql(pg_url, "SELECT trace FROM wheel_timers WHERE key = %s", (key,))
    assert stored.startswith(traceparent(context.span_id, context.trace_id))
    attempt = fire_spans(spans)[key]
    assert attempt.parent is None
    assert [link.context.span_id for link in attempt.links] == [context.span_id]
    assert attempt.attributes["wheel_engine.outcome"] == "succeeded"


async def test_in_the_callers_transaction(spans: Any, pg_url: str) -> None:
    """``connection=``: ``schedule`` and ``schedule_many`` in the caller's transaction store
    the context too, and the attempts link to their spans once the caller commits."""
    import psycopg

    fired: dict[str, str] = {}
    a = node(pg_url, "a", fired)
    async with a, await psycopg.AsyncConnection.connect(pg_url) as conn:
        with trace.get_tracer("app").start_as_current_span("request"):
            async with conn.transaction():
                await a.schedule("h", delay=0, key="one", connection=conn)
                await a.schedule_many([{"handler": "h", "delay": 0, "key": "two"}], connection=conn)
        await until(lambda: {"one", "two"} <= fire_spans(spans).keys())
    made = produced(spans)  # schedule_many's span names no key: None
    links = {key: [k.context.span_id for k in s.links] for key, s in fire_spans(spans).items()}
    assert links == {"one": [made["one"]], "two": [made[None]]}


async def test_a_redrive_from_another_node_links_to_the_redriver(spans: Any, pg_url: str) -> None:
    """The timer dies on b; a redrives it inside an operator's span; b's next attempt links to
    a's ``redrive`` span (the row's context replaced by the redriver's)."""
    tries: list[str] = []
    a, b = (Engine(pg_url, node=name, lease=1.5, horizon=60.0) for name in ("a", "b"))

    def once(firing: Firing) -> None:
        tries.append(firing.key)
        if len(tries) == 1:
            raise RuntimeError("refused")

    for e in (a, b):
        e.register("h", once, retry=RetryPolicy(max_attempts=1))
    async with a, b:
        await until(lambda: len(owned(a)) == 32 and len(owned(b)) == 32)
        key = key_in(owned(b), "r")
        await a.schedule("h", delay=0.2, key=key)
        await until(lambda: (info := b.get(key)) is not None and info.state.name == "DEAD")
        await asyncio.wait_for(dead_in_the_database(a, key), 15.0)
        with trace.get_tracer("app").start_as_current_span("operator"):
            await a.redrive(key)
        await until(lambda: sum(1 for s in spans.get_finished_spans() if s.name == "fire h") == 2)
    (redrive,) = [s for s in spans.get_finished_spans() if s.name == "redrive h"]
    (scheduling,) = [s for s in spans.get_finished_spans() if s.name == "schedule h"]
    first, second = sorted(
        (s for s in spans.get_finished_spans() if s.name == "fire h"),
        key=lambda s: s.attributes["wheel_engine.timer.version"],
    )
    assert first.attributes["wheel_engine.outcome"] == "dead"
    assert [link.context.span_id for link in first.links] == [scheduling.context.span_id]
    assert second.attributes["wheel_engine.outcome"] == "succeeded"
    assert [link.context.span_id for link in second.links] == [redrive.context.span_id]


async def test_recurring_occurrences_on_both_nodes_link_to_the_creator(
    spans: Any, pg_url: str
) -> None:
    """A recurrence lives in its name's partition (#25): created on a, it runs on b, which holds
    that partition; b reads the recurrence's record (and the creator's context in it) from the
    database to commit the next occurrence; every attempt links to a's span."""
    fired: dict[str, str] = {}
    a, b = (Engine(pg_url, node=name, lease=1.5, horizon=60.0) for name in ("a", "b"))
    for e, name in ((a, "a"), (b, "b")):
        e.register("sweep", lambda firing, name=name: fired.setdefault(firing.key, name))
    async with a, b:
        await until(lambda: len(owned(a)) == 32 and len(owned(b)) == 32)
        recurrence = key_in(owned(b), "s")
        with trace.get_tracer("app").start_as_current_span("request"):
            info = await a.schedule_recurring(recurrence, "sweep", every=0.25)
        await until(lambda: set(fired.values()) == {"b"} and len(fired) >= 6)
        assert await a.cancel_recurring(recurrence, version=info.version)
    (created,) = [s for s in spans.get_finished_spans() if s.name == "schedule_recurring sweep"]
    attempts = [s for s in spans.get_finished_spans() if s.name == "fire recurring:sweep"]
    assert len(attempts) >= 6
    for attempt in attempts:
        assert [link.context.span_id for link in attempt.links] == [created.context.span_id]


CONTEXT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01 vendor=x"
OTHER = "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"


async def test_the_store_keeps_replaces_and_redrives_the_context(pg_url: str) -> None:
    """The row's context: stored with a schedule, replaced (or cleared) with the timer by a
    replace, kept by one that "keep" refused, kept by a redrive without one, replaced by a
    redrive with one; every reader (here ``lookup``) returns it."""
    s = await PostgresStore.open(pg_url, node="a", lease=10.0, partitions=8, listen=False)
    try:
        [first] = await s.schedule_many([s.request("k", "h", 1e9, None, "replace", CONTEXT)])
        assert first.timer.trace == CONTEXT and first.timer.row().trace == CONTEXT
        [kept] = await s.schedule_many([s.request("k", "h", 1e9, None, "keep", OTHER)])
        assert kept.kept and kept.timer.trace == CONTEXT
        [replaced] = await s.schedule_many([s.request("k", "h", 1e9)])
        assert replaced.timer.trace is None
        [again] = await s.schedule_many([s.request("k", "h", 0.0, None, "replace", CONTEXT)])
        await s.maintain()
        [claimed] = (await s.attempt([("k", again.timer.version)])).claimed
        await s.finish([Outcome("k", claimed.version, claimed.epoch, "DEAD", "boom")])
        redriven = await s.redrive("k", at=0.0)
        assert redriven is not None and redriven.trace == CONTEXT
        [claimed] = (await s.attempt([("k", redriven.version)])).claimed
        await s.finish([Outcome("k", claimed.version, claimed.epoch, "DEAD", "boom")])
        redriven = await s.redrive("k", trace=OTHER)
        assert redriven is not None and redriven.trace == OTHER
        looked = await s.lookup("k")
        assert looked is not None and looked.trace == OTHER
    finally:
        await s.close()


def schema_one(url: str) -> None:
    """The database as wheel-engine wrote it before tracing: schema_version 1."""
    for ddl in _V1:
        sql(url, ddl)
    for statement, params in _initial_rows(PARTITIONS):
        sql(url, statement, params)
    sql(url, "UPDATE wheel_meta SET value = 1 WHERE name = 'schema_version'")


def old_row(url: str, key: str, due: float) -> None:
    """A pending timer inserted as schema 1's statement did (no trace column named)."""
    sql(
        url,
        "INSERT INTO wheel_timers (key, partition, version, handler, due, payload, state)"
        " VALUES (%s, %s, nextval('wheel_version_seq'), 'h', %s, NULL, 0)",
        (key, partition_of(key, PARTITIONS), due),
    )


async def test_rows_from_before_tracing_fire_unlinked(spans: Any, pg_url: str) -> None:
    schema_one(pg_url)
    now = time.time()
    old_row(pg_url, "old-soon", now + 1.0)
    old_row(pg_url, "old-late", now + 8.0)
    fired: dict[str, str] = {}
    first = node(pg_url, "a", fired)
    async with first:  # migrates the schema to the latest: the old rows' trace is NULL
        version = sql(pg_url, "SELECT value FROM wheel_meta WHERE name = 'schema_version'")
        assert version == [(SCHEMA_VERSION,)]
        with trace.get_tracer("app").start_as_current_span("request"):
            await first.schedule("h", at=now + 1.0, key="new-soon")
            await first.schedule("h", at=now + 8.0, key="new-late")
        await until(lambda: {"old-soon", "new-soon"} <= fire_spans(spans).keys())
    assert set(fired) == {"old-soon", "new-soon"}  # the late ones wait for the restart
    again = node(pg_url, "b", fired)  # a restart: a new engine, its table read from the rows
    async with again:
        await until(lambda: {"old-late", "new-late"} <= fire_spans(spans).keys())
    links = {
        key: [link.context.span_id for link in span.links]
        for key, span in fire_spans(spans).items()
    }
    made = produced(spans)
    assert links == {
        "old-soon": [],
        "new-soon": [made["new-soon"]],
        "old-late": [],
        "new-late": [made["new-late"]],
    }
