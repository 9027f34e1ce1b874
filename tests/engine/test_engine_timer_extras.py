"""The fields most timers never set live out of line (``wheel_engine.timer.TimerExtras``): a
timer reads and sets them as attributes, a pending timer pays one slot for all of them, and a
recovered timer's payload bytes cost no second object."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import wheel_engine
from wheel_engine import Engine, Firing, RetryPolicy
from wheel_engine.model import TimerState
from wheel_engine.testing import VirtualClock
from wheel_engine.timer import UNDECODED, Timer, TimerExtras, recovered_timer

EXTRA_FIELDS = ("packed", "trace", "last_error")


def recovered(packed: bytes | None, last_error: str | None = None) -> Timer:
    return recovered_timer("k", 1, "h", 1.0, packed, TimerState.PENDING, 0, last_error, None, 0.0)


def test_a_scheduled_timer_has_no_extras() -> None:
    timer = Timer("k", 1, "h", 1.0, {"a": 1})
    assert timer.extras is None
    assert all(getattr(timer, name) is None for name in EXTRA_FIELDS)


@pytest.mark.skipif(wheel_engine.COMPILED, reason="a compiled class lists no __slots__")
def test_one_slot_holds_the_extras() -> None:
    timer = Timer("k", 1, "h", 1.0, {"a": 1})
    slots = [name for cls in type(timer).__mro__ for name in getattr(cls, "__slots__", ())]
    assert "extras" in slots
    assert not set(EXTRA_FIELDS) & set(slots)


def test_setting_none_makes_no_extras() -> None:
    timer = Timer("k", 1, "h", 1.0, None)
    for name in EXTRA_FIELDS:
        setattr(timer, name, None)
    timer.charge(2.0)
    assert timer.extras is None


def test_a_recovered_payload_is_its_bytes_alone_until_decoded() -> None:
    timer = recovered(b"\x81\xa1a\x01")  # msgpack {"a": 1}
    assert timer.extras == b"\x81\xa1a\x01"
    assert timer.packed == b"\x81\xa1a\x01" and timer.payload is UNDECODED
    assert timer.info().payload == {"a": 1}
    assert timer.packed is None and timer.extras is None


def test_a_field_set_keeps_the_recovered_bytes_beside_it() -> None:
    timer = recovered(b"\xc0", last_error="boom")  # msgpack None
    assert isinstance(timer.extras, TimerExtras)
    assert timer.last_error == "boom" and timer.packed == b"\xc0"
    timer.charge(3.0)
    timer.trace = "00-trace"
    assert timer.trace == "00-trace" and timer.packed == b"\xc0"
    assert timer.decode_payload() is None
    assert timer.packed is None and timer.info().last_error == "boom"


def test_charge_clears_a_recovered_crash_interrupt() -> None:
    timer = recovered(b"\xc0")
    timer.interrupt = "crash"
    timer.charge(VirtualClock().time())
    assert timer.interrupt is None and timer.packed == b"\xc0"


FIELD_VALUES: dict[str, Any] = {
    "packed": st.none() | st.binary(min_size=1, max_size=4),
    "trace": st.none() | st.text(min_size=1, max_size=4),
    "last_error": st.none() | st.text(min_size=1, max_size=4),
}
SETS = st.lists(
    st.sampled_from(EXTRA_FIELDS).flatmap(lambda name: st.tuples(st.just(name), FIELD_VALUES[name]))
)


@given(SETS)
def test_the_extras_read_back_what_was_set_as_plain_attributes_would(
    sets: list[tuple[str, Any]],
) -> None:
    """Against a model of three plain attributes: any sequence of sets reads back the same, and
    while only ``packed`` was ever set to something, no :class:`TimerExtras` is made."""
    timer = Timer("k", 1, "h", 1.0, None)
    model = dict.fromkeys(EXTRA_FIELDS)
    for name, value in sets:
        setattr(timer, name, value)
        model[name] = value
        assert {field: getattr(timer, field) for field in EXTRA_FIELDS} == model
    if not any(name != "packed" and value is not None for name, value in sets):
        assert timer.extras is model["packed"]


async def test_a_failed_timer_keeps_its_error_and_payload_across_a_restart(tmp_path: Path) -> None:
    """The error text and the recovered payload's bytes share the extras: both read back after
    a restart, and the payload reaches the handler."""
    path = tmp_path / "j.db"
    clock = VirtualClock()
    seen: list[Any] = []
    policy = RetryPolicy(max_attempts=3, initial=10.0, jitter=False)

    def fails(firing: Firing) -> None:
        raise RuntimeError("upstream said no")

    def records(firing: Firing) -> None:
        seen.append(firing.payload)

    engine = Engine(path, clock=clock)
    engine.register("h", fails, retry=policy)
    async with engine:
        await engine.schedule("h", delay=1, key="k", payload={"order": 7})
        await clock.advance(2)  # fails once: PENDING again, a retry due in 10 s
    engine = Engine(path, clock=clock)
    engine.register("h", records, retry=policy)
    async with engine:
        info = engine.get("k")
        assert info is not None and info.state is TimerState.PENDING and info.attempts == 1
        assert info.last_error is not None and "upstream said no" in info.last_error
        assert info.payload == {"order": 7}
        await clock.advance(11)
        assert seen == [{"order": 7}]
        done = engine.get("k")
        assert done is not None and done.state is TimerState.SUCCEEDED
