"""Bad input is rejected before anything changes, in memory or in the journal (SPEC, Scheduling).

Each case runs against an engine holding one committed timer ``existing`` and checks, after the
rejected call, that the timer is exactly as committed: a rejected replace must not leave an
uncommitted version in its place, a rejected cancel must not mark it CANCELED.
"""

from __future__ import annotations

import enum
import math
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from journal import Journal
from wheel_engine import (
    CancelResult,
    Engine,
    EngineError,
    Firing,
    JournalError,
    PermanentError,
    RetryPolicy,
    TimerState,
    UnknownHandler,
)
from wheel_engine.key_index import KeyIndex
from wheel_engine.testing import VirtualClock
from wheel_engine.validation import MAX_TIME, CheckedRequest, RequestChecker


class Name(str):
    """A str subclass that misbehaves: no method of it may run inside the engine."""

    def __hash__(self) -> int:
        raise AssertionError("the engine used the subclass's __hash__")

    def encode(self, *args: Any, **kwargs: Any) -> bytes:
        raise AssertionError("the engine used the subclass's encode")


class Handlers(enum.StrEnum):
    H = "h"


def engine_on(path: Path | None, clock: VirtualClock, fired: list[Firing]) -> Engine:
    engine = Engine(path, clock=clock, durability="normal", max_payload_bytes=1024)
    engine.register("h", fired.append)
    return engine


UTC_MINUS_14 = timezone(timedelta(hours=-14))

BAD_SCHEDULES: list[tuple[dict[str, Any], type[Exception]]] = [
    ({"handler": "nope", "delay": 1}, UnknownHandler),
    ({"handler": "", "delay": 1}, ValueError),
    ({"handler": None, "delay": 1}, TypeError),
    ({"handler": b"h", "delay": 1}, TypeError),
    ({"handler": "h\ud800", "delay": 1}, ValueError),
    ({"handler": "h"}, ValueError),
    ({"handler": "h", "delay": 1, "at": 5.0}, ValueError),
    ({"handler": "h", "delay": -1}, ValueError),
    ({"handler": "h", "delay": math.nan}, ValueError),
    ({"handler": "h", "delay": math.inf}, ValueError),
    ({"handler": "h", "delay": 1e308}, ValueError),  # was OverflowError inside the wheel
    ({"handler": "h", "delay": 10**400}, ValueError),
    ({"handler": "h", "delay": MAX_TIME}, ValueError),
    ({"handler": "h", "delay": True}, TypeError),
    ({"handler": "h", "delay": "5"}, TypeError),
    ({"handler": "h", "at": 10**400}, ValueError),  # was OverflowError
    ({"handler": "h", "at": -(10**400)}, ValueError),
    ({"handler": "h", "at": 1e300}, ValueError),
    ({"handler": "h", "at": MAX_TIME + 1}, ValueError),
    ({"handler": "h", "at": -5.0}, ValueError),
    ({"handler": "h", "at": -math.inf}, ValueError),
    ({"handler": "h", "at": datetime(2030, 1, 1)}, ValueError),  # naive
    ({"handler": "h", "at": datetime(1, 1, 1, tzinfo=UTC)}, ValueError),  # before the epoch
    ({"handler": "h", "at": datetime(9999, 12, 31, 23, tzinfo=UTC_MINUS_14)}, ValueError),
    ({"handler": "h", "delay": 1, "payload": object()}, TypeError),
    ({"handler": "h", "delay": 1, "payload": {1, 2}}, TypeError),
    ({"handler": "h", "delay": 1, "payload": 2**64}, TypeError),
    ({"handler": "h", "delay": 1, "payload": {(1, 2): "x"}}, TypeError),  # never decodes back
    ({"handler": "h", "delay": 1, "payload": {"k": {(1,): 2}}}, TypeError),
    ({"handler": "h", "delay": 1, "payload": "s\udc80"}, TypeError),
    ({"handler": "h", "delay": 1, "payload": "x" * 2000}, ValueError),  # over 1024 bytes
    ({"handler": "h", "delay": 1, "key": ""}, ValueError),
    ({"handler": "h", "delay": 1, "key": 7}, TypeError),
    ({"handler": "h", "delay": 1, "key": b"existing"}, TypeError),
    ({"handler": "h", "delay": 1, "key": ["existing"]}, TypeError),
    ({"handler": "h", "delay": 1, "key": "k\ud800"}, ValueError),  # stalled the tick before
    ({"handler": "h", "delay": 1, "key": "\udfffexisting"}, ValueError),
    ({"handler": "h", "delay": 1, "on_conflict": "merge"}, ValueError),
    ({"handler": "h", "delay": 1, "on_conflict": ["keep"]}, ValueError),
]


async def _committed_state(path: Path) -> dict[str, Any]:
    journal = await Journal.open(path, readonly=True)
    try:
        return (await journal.recover()).timers
    finally:
        await journal.close()


@pytest.mark.parametrize(("kwargs", "error"), BAD_SCHEDULES)
async def test_bad_schedule_changes_nothing(
    tmp_path: Path, kwargs: dict[str, Any], error: type[Exception]
) -> None:
    clock = VirtualClock()
    fired: list[Firing] = []
    db = tmp_path / "t.db"
    async with engine_on(db, clock, fired) as engine:
        committed = await engine.schedule("h", delay=5, key="existing", payload={"n": 1})
        await engine.quiesce()
        journal_before = await _committed_state(db)
        request = dict(kwargs)
        handler = request.pop("handler")
        with pytest.raises(error) as raised:
            await engine.schedule(handler, key=request.pop("key", "existing"), **request)
        assert type(raised.value) is error  # never OverflowError, AttributeError, Unicode...
        with pytest.raises(error):  # the same request inside a batch rejects the whole batch
            await engine.schedule_many(
                [{"handler": "h", "delay": 1, "key": "other"}, {"key": "existing", **kwargs}]
            )
        assert engine.get("existing") == committed
        assert engine.get("other") is None
        assert engine.stats()["pending"] == 1
        await engine.quiesce()
        assert await _committed_state(db) == journal_before
        await clock.advance(6)  # the committed version still fires, and only it
        assert [(f.key, f.version) for f in fired] == [("existing", committed.version)]


@pytest.mark.parametrize(
    ("requests", "error"),
    [
        ([None], TypeError),  # was AttributeError
        ([{"handler": "h", "delay": 1}, 5], TypeError),
        ([{"handler": "h", "delay": 1}, "handler"], TypeError),
        ([{"handler": "h", "delay": 1}, [("handler", "h")]], TypeError),
        ([{"handler": "h", "delay": 1, "dealy": 2}], TypeError),
        ([{"handler": "h", "delay": 1, 5: 2}], TypeError),
        ([{"delay": 1}], TypeError),  # no handler
        (None, TypeError),
    ],
)
async def test_bad_schedule_many_changes_nothing(requests: Any, error: type[Exception]) -> None:
    clock = VirtualClock()
    engine = engine_on(None, clock, [])
    async with engine:
        with pytest.raises(error) as raised:
            await engine.schedule_many(requests)
        assert type(raised.value) is error
        assert engine.timers() == [] and engine.stats()["pending"] == 0


async def test_str_subclasses_become_plain_str_before_any_use(tmp_path: Path) -> None:
    clock = VirtualClock()
    fired: list[Firing] = []
    db = tmp_path / "t.db"
    async with engine_on(db, clock, fired) as engine:
        info = await engine.schedule(Handlers.H, delay=5, key=Name("k"), payload=Name("p"))
        assert type(info.key) is str and type(info.handler) is str and type(info.payload) is str
        [many] = await engine.schedule_many([{"handler": Handlers.H, "delay": 9, "key": Name("m")}])
        assert type(many.key) is str
        replaced = await engine.schedule("h", delay=6, key=Name("k"))  # replace, not a 2nd key
        assert replaced.version > info.version and len(engine.timers()) == 2
        # cancel() with a str subclass raised TypeError after marking the timer CANCELED
        assert await engine.cancel(Name("m")) is CancelResult.CANCELED
        assert await engine.cancel(Name("m"), version=many.version) is CancelResult.ALREADY_DONE
    async with engine_on(db, clock, fired) as engine:
        assert engine.get("m").state is TimerState.CANCELED  # type: ignore[union-attr]
        assert engine.get("k") == replaced
        await clock.advance(7)
        assert [f.key for f in fired] == ["k"]


@pytest.mark.parametrize(
    ("key", "version", "error"),
    [
        (7, None, TypeError),
        (None, None, TypeError),
        ("", None, ValueError),
        ("k\ud800", None, ValueError),
        ("k", "1", TypeError),
        ("k", True, TypeError),
        ("k", 1.0, TypeError),
    ],
    ids=["int", "none", "empty", "surrogate", "str-version", "bool-version", "float-version"],
)
async def test_bad_cancel_changes_nothing(
    tmp_path: Path, key: Any, version: Any, error: type[Exception]
) -> None:
    clock = VirtualClock()
    fired: list[Firing] = []
    async with engine_on(tmp_path / "t.db", clock, fired) as engine:
        info = await engine.schedule("h", delay=5, key="k")
        with pytest.raises(error):
            await engine.cancel(key, version=version)
        assert engine.get("k") == info and engine.stats()["canceled"] == 0
        await clock.advance(6)
        assert [f.key for f in fired] == ["k"]


async def test_bad_redrive_changes_nothing(tmp_path: Path) -> None:
    clock = VirtualClock()
    db = tmp_path / "t.db"

    def poison(firing: Firing) -> None:
        raise PermanentError("no")

    engine = Engine(db, clock=clock, durability="normal")
    engine.register("poison", poison)
    async with engine:
        await engine.schedule("poison", delay=1, key="d")
        await clock.advance(2)
        dead = engine.get("d")
        assert dead is not None and dead.state is TimerState.DEAD
        bad: list[tuple[Any, Any, type[Exception]]] = [
            ("d", math.nan, ValueError),
            ("d", math.inf, ValueError),
            ("d", 1e308, ValueError),
            ("d", 10**400, ValueError),
            ("d", datetime(2030, 1, 1), ValueError),
            ("d", "soon", TypeError),
            (7, None, TypeError),
            ("d\ud800", None, ValueError),
            ("nope", None, KeyError),
        ]
        for key, at, error in bad:
            with pytest.raises(error):
                await engine.redrive(key, at=at)
            assert engine.get("d") == dead
        redriven = await engine.redrive(Name("d"), at=clock.time() + 10)
        assert redriven.version > dead.version and type(redriven.key) is str
        with pytest.raises(EngineError):  # not DEAD any more
            await engine.redrive("d")


async def test_a_closed_journal_rejects_calls_without_changing_memory(tmp_path: Path) -> None:
    clock = VirtualClock()
    async with engine_on(tmp_path / "t.db", clock, []) as engine:
        info = await engine.schedule("h", delay=5, key="k")
        assert engine.journal is not None
        await engine.journal.close()  # as after a failed writer: submit raises at once
        with pytest.raises(JournalError):
            await engine.schedule("h", delay=50, key="k")
        with pytest.raises(JournalError):
            await engine.schedule_many([{"handler": "h", "delay": 50, "key": "k"}])
        with pytest.raises(JournalError):
            await engine.cancel("k")
        assert engine.get("k") == info and len(engine.timers()) == 1
        assert engine.stats()["canceled"] == 0


async def test_payload_is_what_it_decodes_to_before_and_after_a_restart(tmp_path: Path) -> None:
    clock = VirtualClock()
    fired: list[Firing] = []
    db = tmp_path / "t.db"
    payload: dict[str, Any] = {"t": (1, 2), "nan": math.nan, 3: [b"x", None]}
    async with engine_on(db, clock, fired) as engine:
        info = await engine.schedule("h", delay=5, key="k", payload=payload)
        payload["t"] = "changed by the caller afterwards"
        assert info.payload["t"] == [1, 2] and math.isnan(info.payload["nan"])
        before = engine.get("k")
    async with engine_on(db, clock, fired) as engine:
        after = engine.get("k")
        assert after is not None and before is not None
        assert after.payload["t"] == before.payload["t"] == [1, 2]
        assert after.payload[3] == before.payload[3] == [b"x", None]
        await clock.advance(6)
        assert fired[0].payload["t"] == [1, 2]


async def test_one_bad_error_text_never_stalls_the_other_timers(tmp_path: Path) -> None:
    """A handler's error text with a lone surrogate failed to encode inside the tick: the
    timers of that batch stayed RUNNING forever. Now the text is escaped and nothing stalls."""
    clock = VirtualClock()
    fired: list[str] = []
    db = tmp_path / "t.db"

    def handle(firing: Firing) -> None:
        if firing.key == "bad":
            raise ValueError("broken \ud800 text")
        fired.append(firing.key)

    def make() -> Engine:
        engine = Engine(db, clock=clock, durability="normal")
        engine.register("h", handle, retry=RetryPolicy(max_attempts=2, initial=1.0, jitter=False))
        return engine

    async with make() as engine:
        await engine.schedule_many(
            [{"handler": "h", "delay": 1, "key": key} for key in ("a", "bad", "c")]
        )
        await clock.advance(1.5)  # first attempt of "bad" fails: a Retry record with the text
        await engine.schedule("h", delay=1, key="later")
        await clock.advance(5)  # the retry fails too: a Dead record with the text
        assert sorted(fired) == ["a", "c", "later"]
        states = {info.key: info.state for info in engine.timers()}
        assert states == {
            "a": TimerState.SUCCEEDED,
            "bad": TimerState.DEAD,
            "c": TimerState.SUCCEEDED,
            "later": TimerState.SUCCEEDED,
        }
        assert engine.stats()["running"] == 0
    async with make() as engine:  # the journal took every record: the restart agrees
        dead = engine.get("bad")
        assert dead is not None and dead.state is TimerState.DEAD and dead.attempts == 2
        assert "broken" in (dead.last_error or "")
        assert engine.get("a").state is TimerState.SUCCEEDED  # type: ignore[union-attr]


def test_engine_rejects_bad_retention_settings() -> None:
    assert Engine(None).retention == 3600.0 and Engine(None).max_retained == 100_000
    for options in (
        {"retention": -1.0},
        {"retention": math.nan},
        {"max_retained": -1},
        {"max_retained": 1.5},
        {"tick": 1e-300},
    ):
        with pytest.raises(ValueError):
            Engine(None, **options)  # type: ignore[arg-type]


def test_a_checked_request_is_read_by_name() -> None:
    checker = RequestChecker({"h": object()}, KeyIndex(), 65536)
    request = checker.request("h", None, 5, {"n": (1, 2)}, "k", "keep", 100.0)
    assert isinstance(request, CheckedRequest)
    assert (request.handler, request.due, request.key, request.on_conflict) == (
        "h",
        105.0,
        "k",
        "keep",
    )
    assert request.payload == {"n": [1, 2]} and request.data is not None  # as it decodes
    assert checker.request("h", 7.0, None, None, None, "replace", 100.0).data is None
