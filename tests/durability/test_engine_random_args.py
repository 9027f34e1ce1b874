"""Random arguments, valid and invalid, at every public call of a durable engine (SPEC,
"Bad input raises before anything is written or changed in memory").

A durable engine on a real SQLite file and a virtual clock gets a random run of calls:
``schedule``, ``schedule_many``, ``cancel``, ``redrive``, ``get``, ``timers``, ``stats``,
``compact`` and time moving on, each argument drawn from valid values and from the bad ones of
SPEC's list: wrong types, ``str`` subclasses, lone surrogates, empty names, NaN, infinities,
huge ints and floats, naive and out-of-range datetimes, payloads msgpack cannot encode or would
not decode back equal (tuple keys), oversized payloads, non-mapping batch items, unknown
keywords. Checked:

- a call raises only the documented error types (never ``OverflowError``, ``AttributeError``,
  ``UnicodeEncodeError``...);
- a rejected call leaves memory (``get()``, ``timers()``, ``stats()``, the engine's indexes)
  and the journal (recovered read-only) exactly as they were;
- nothing stalls: once time has moved past every due time, no timer is left RUNNING or due;
- a restart agrees with memory: the recovered engine holds exactly the timers the old one did
  (RUNNING ones come back PENDING).
"""

from __future__ import annotations

import asyncio
import math
import tempfile
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import msgpack
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from journal import Journal
from wheel_engine import (
    DuplicateKey,
    Engine,
    EngineError,
    Firing,
    PermanentError,
    TimerInfo,
    TimerNotFound,
    TimerState,
    UnknownHandler,
)
from wheel_engine.testing import DEFAULT_START, VirtualClock

KEYS = ("a", "b", "c")
HANDLERS = ("ok", "boom", "slow")
#: The error types a rejected call may raise, exactly (subclasses would hide a raw error).
REJECTIONS = (
    TypeError,
    ValueError,
    KeyError,
    UnknownHandler,
    DuplicateKey,
    TimerNotFound,
    EngineError,
)
MAX_PAYLOAD = 256  # max_payload_bytes: small, so that oversized payloads are cheap to draw
WRITING = ("schedule", "many", "cancel", "redrive")  # the calls that may write records
SLOW = 3.0  # seconds the "slow" handler runs: some timers are RUNNING when a call comes


class Sub(str):
    """A str subclass: the engine must store a plain str (or reject it), never the subclass."""


def weighted(good: st.SearchStrategy[Any], bad: st.SearchStrategy[Any]) -> Any:
    """Mostly good values, so that runs get far enough for the bad ones to meet real state."""
    return st.one_of(good, good, good, bad)


BAD_NAMES = st.one_of(
    st.just(""),
    st.just("a\ud800"),
    st.just("\udfff"),
    st.sampled_from(KEYS).map(Sub),
    st.integers(-2, 2),
    st.none(),
    st.binary(max_size=2),
    st.just(["a"]),
    st.text(max_size=2),
)
keys = weighted(st.sampled_from(KEYS), BAD_NAMES)
NEAR_MAX = 20.0  # the latest valid due is this many seconds ahead
NEAR = st.floats(0, NEAR_MAX, allow_nan=False)
GOOD_ATS = st.one_of(
    NEAR.map(lambda d: DEFAULT_START + d),
    NEAR.map(lambda d: datetime.fromtimestamp(DEFAULT_START + d, UTC)),
)
BAD_TIMES = st.one_of(
    st.floats(),
    st.integers(),
    st.sampled_from([10**400, -(10**400), 1e308, -1e308, math.nan, math.inf, -math.inf]),
    st.booleans(),
    st.text(max_size=2),
    st.just(datetime(2030, 1, 1)),  # naive
    st.just(datetime(1, 1, 1, tzinfo=UTC)),
    st.just(datetime(9999, 12, 31, 23, tzinfo=timezone(timedelta(hours=-14)))),
)
GOOD_PAYLOADS = st.one_of(
    st.none(),
    st.integers(-(2**63), 2**64 - 1),
    st.text(max_size=5),
    st.binary(max_size=5),
    st.floats(),
    st.lists(st.integers(0, 9), max_size=3),
    st.tuples(st.integers(0, 9)),  # comes back a list: accepted, stored as a list
    st.dictionaries(st.text(max_size=3), st.integers(0, 9), max_size=3),
    st.dictionaries(st.integers(0, 9), st.none(), max_size=2),
    st.just(Sub("s")),
)
BAD_PAYLOADS = st.one_of(
    st.just({(1, 2): 3}),
    st.just({"k": {(1,): 2}}),
    st.just({1, 2}),
    st.just(2**64),
    st.just(-(2**63) - 1),
    st.just("x\ud800"),
    st.just("x" * (MAX_PAYLOAD + 1)),
    st.builds(object),
    st.just(datetime(2030, 1, 1, tzinfo=UTC)),
)
GOOD_CONFLICTS = st.sampled_from(["replace", "keep", "error"])

valid_schedules = st.builds(
    lambda handler, when, payload, key, conflict: {
        "handler": handler,
        **when,
        "payload": payload,
        "key": key,
        "on_conflict": conflict,
    },
    st.sampled_from(HANDLERS),
    st.one_of(st.builds(dict, delay=NEAR), st.builds(dict, at=GOOD_ATS)),
    GOOD_PAYLOADS,
    st.one_of(st.sampled_from(KEYS), st.sampled_from(KEYS), st.none()),
    GOOD_CONFLICTS,
)
#: One bad value for one field of a valid request: SPEC's list, case by case.
SPOILERS: dict[str, Any] = {
    "handler": st.one_of(BAD_NAMES, st.just("nope")),
    "key": BAD_NAMES.filter(lambda name: name is not None),
    "at": BAD_TIMES,
    "delay": BAD_TIMES,
    "payload": BAD_PAYLOADS,
    "on_conflict": st.sampled_from(["x", None, 1, ["keep"]]),
    "both": NEAR,  # at and delay
    "neither": st.none(),
}


def spoil(request: dict[str, Any], field: str, value: Any) -> dict[str, Any]:
    spoiled = dict(request)
    if field in ("at", "delay"):
        spoiled.pop("at", None)
        spoiled.pop("delay", None)
    if field == "both":
        spoiled.update(at=DEFAULT_START + value, delay=value)
    elif field == "neither":
        spoiled.pop("at", None)
        spoiled.pop("delay", None)
    else:
        spoiled[field] = value
    return spoiled


bad_fields = st.sampled_from(sorted(SPOILERS)).flatmap(
    lambda field: st.tuples(st.just(field), SPOILERS[field])
)
spoiled_schedules = st.tuples(valid_schedules, bad_fields).map(
    lambda drawn: spoil(drawn[0], *drawn[1])
)
schedule_kwargs = st.one_of(valid_schedules, valid_schedules, spoiled_schedules)
versions = st.one_of(st.none(), st.integers(0, 40), st.sampled_from([True, "1", 1.0, 2**70]))
states = st.one_of(st.none(), st.sampled_from(list(TimerState)), st.sampled_from(["BOGUS", 5]))
ats = st.one_of(st.none(), GOOD_ATS, BAD_TIMES)
handlers = weighted(st.sampled_from(HANDLERS), SPOILERS["handler"])

batch_items = st.one_of(
    schedule_kwargs,
    schedule_kwargs,
    st.none(),
    st.integers(),
    st.just("handler"),
    schedule_kwargs.map(lambda kw: {**kw, "dealy": 1}),
)
ops = st.one_of(
    st.tuples(st.just("schedule"), schedule_kwargs),
    st.tuples(st.just("many"), st.lists(batch_items, max_size=4)),
    st.tuples(st.just("cancel"), keys, versions),
    st.tuples(st.just("redrive"), keys, ats),
    st.tuples(st.just("get"), keys),
    st.tuples(st.just("timers"), states, st.one_of(st.none(), handlers)),
    st.tuples(st.just("advance"), st.floats(0, 8)),
    st.tuples(st.just("compact")),
)


def make_engine(path: Path, clock: VirtualClock) -> Engine:
    engine = Engine(
        path,
        clock=clock,
        durability="normal",
        max_payload_bytes=MAX_PAYLOAD,
        retention=30.0,
        compact_min_records=10**9,  # only the drawn compactions
    )
    engine.register("ok", lambda firing: None)

    def boom(firing: Firing) -> None:
        raise PermanentError("boom")

    async def slow(firing: Firing) -> None:
        await clock.sleep(SLOW)

    engine.register("boom", boom)
    engine.register("slow", slow)
    return engine


def row(info: TimerInfo, restarted: bool = False) -> tuple[Any, ...]:
    """A timer as compared across calls and restarts: payload as msgpack (NaN == NaN), exact
    types of the names (a str subclass must not have got in)."""
    state = info.state
    if restarted and state is TimerState.RUNNING:
        state = TimerState.PENDING  # an interrupted attempt runs again after a restart
    return (
        type(info.key),
        info.key,
        type(info.handler),
        info.handler,
        info.version,
        info.due,
        msgpack.packb(info.payload, use_bin_type=True),
        state,
        info.attempts,
        info.last_error,
    )


def memory(engine: Engine) -> tuple[Any, ...]:
    timers = sorted(row(info) for info in engine.timers())
    indexes = (
        len(engine._table.timers),
        len(engine._table.finished),
        len(engine._table.dead),
        len(engine._table.wheel),
        len(engine._commits.committing),
    )
    return timers, engine.stats(), indexes


async def journal_state(path: Path) -> dict[str, Any]:
    journal = await Journal.open(path, readonly=True)
    try:
        return (await journal.recover()).timers
    finally:
        await journal.close()


async def call(engine: Engine, clock: VirtualClock, op: tuple[Any, ...]) -> None:
    name = op[0]
    if name == "schedule":
        kwargs = dict(op[1])
        await engine.schedule(kwargs.pop("handler"), **kwargs)
    elif name == "many":
        await engine.schedule_many(op[1])
    elif name == "cancel":
        await engine.cancel(op[1], version=op[2])
    elif name == "redrive":
        await engine.redrive(op[1], at=op[2])
    elif name == "get":
        engine.get(op[1])
    elif name == "timers":
        engine.timers(op[1], op[2])
    elif name == "advance":
        await clock.advance(op[1])
    else:
        await engine.compact()


async def run(path: Path, steps: list[tuple[Any, ...]]) -> None:
    clock = VirtualClock()
    engine = make_engine(path, clock)
    await engine.start()
    try:
        for op in steps:
            # Settled, not only quiesced: every task has run until it waits on time, so the
            # memory read here cannot move while the call below is made.
            await clock.settle()
            before = memory(engine)
            writes = op[0] in WRITING
            committed = await journal_state(path) if writes else None
            try:
                await call(engine, clock, op)
                event(f"{op[0]} accepted")
            except REJECTIONS as exc:
                event(f"{op[0]} rejected: {type(exc).__name__}")
                assert type(exc) in REJECTIONS, repr(exc)
                assert memory(engine) == before, op
                if writes:
                    await engine.quiesce()
                    assert await journal_state(path) == committed, op
        # Settled too: a cancel asked of a running handler has reached its task, which ends the
        # attempt CANCELED (and writes so). Only quiesced, the handler could still be RUNNING
        # here and end CANCELED during close(), after this was read.
        await clock.settle()
        seen = sorted(row(info, restarted=True) for info in engine.timers())
    finally:
        await engine.close(grace=0)
    engine = make_engine(path, clock)
    await engine.start()  # nothing fires before the first await: the state is as recovered
    try:
        assert sorted(row(info) for info in engine.timers()) == seen
        await clock.advance(NEAR_MAX + SLOW + 1)  # past every due, and every slow handler
        await clock.advance(SLOW + 1)
        assert engine.stats()["running"] == 0
        now = clock.time()
        stuck = [i.key for i in engine.timers(TimerState.PENDING) if i.due <= now - 1]
        assert stuck == []
    finally:
        await engine.close(grace=0)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.lists(ops, min_size=1, max_size=30))
def test_random_arguments_never_change_state_when_rejected(steps: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory() as directory:
        asyncio.run(run(Path(directory) / "random.db", steps))
