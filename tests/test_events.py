"""wheel_engine.events: the event values, subscribing, delivery and what a raising callback does.

The engine's emit points (which change emits which event) are tested in
``tests/engine/test_engine_events.py``; here the bus is driven directly.
"""

from __future__ import annotations

import logging

import pytest

from wheel_engine.events import Event, EventBus, EventKind
from wheel_engine.timer import Timer

SPEC_KINDS = [
    "scheduled",
    "fired",
    "succeeded",
    "retry",
    "dead",
    "canceled",
    "redriven",
    "throttled",
]
#: A recurrence's own events (issue 25), after the timers'.
RECURRENCE_KINDS = ["recurrence_scheduled", "recurrence_canceled"]


def timer(key: str = "k", version: int = 7, due: float = 100.0, attempts: int = 0) -> Timer:
    made = Timer(key, version, "orders.expire", due, {"card": "4111 1111 1111 1111"})
    made.attempts = attempts
    return made


def recording(bus: EventBus) -> list[Event]:
    seen: list[Event] = []
    bus.subscribe(seen.append)
    return seen


def test_the_kinds_are_specs_names_and_an_event_has_no_payload() -> None:
    assert [kind.value for kind in EventKind] == SPEC_KINDS + RECURRENCE_KINDS
    assert EventKind.FIRED == "fired"
    assert "payload" not in Event._fields
    assert Event._fields == (
        "kind",
        "key",
        "version",
        "handler",
        "due",
        "at",
        "lateness",
        "attempt",
        "duration",
        "error",
    )


def test_each_emit_method_fills_its_event() -> None:
    bus = EventBus()
    seen = recording(bus)
    t = timer(attempts=0)
    bus.scheduled(t, 90.0)
    t.attempts = 1
    bus.fired(t, 100.25)
    bus.retry(t, 100.5, 0.25, 110.0, "ValueError: flaky")
    t.attempts = 2
    bus.fired(t, 110.0)
    bus.succeeded(t, 111.0, 1.0)
    bus.dead(t, 112.0, None, "attempt 2 was interrupted")
    bus.canceled(t, 113.0)
    bus.canceled(t, 114.0, 0.5)
    bus.redriven(timer(version=9, due=120.0), 115.0)
    F = EventKind
    assert seen == [
        (F.SCHEDULED, "k", 7, "orders.expire", 100.0, 90.0, None, 0, None, None),
        (F.FIRED, "k", 7, "orders.expire", 100.0, 100.25, 0.25, 1, None, None),
        (F.RETRY, "k", 7, "orders.expire", 110.0, 100.5, None, 1, 0.25, "ValueError: flaky"),
        (F.FIRED, "k", 7, "orders.expire", 100.0, 110.0, 10.0, 2, None, None),
        (F.SUCCEEDED, "k", 7, "orders.expire", 100.0, 111.0, None, 2, 1.0, None),
        (F.DEAD, "k", 7, "orders.expire", 100.0, 112.0, None, 2, None, "attempt 2 was interrupted"),
        (F.CANCELED, "k", 7, "orders.expire", 100.0, 113.0, None, 2, None, None),
        (F.CANCELED, "k", 7, "orders.expire", 100.0, 114.0, None, 2, 0.5, None),
        (F.REDRIVEN, "k", 9, "orders.expire", 120.0, 115.0, None, 0, None, None),
    ]
    assert all(isinstance(event, Event) for event in seen)
    assert "4111" not in repr(seen)  # never the payload


def test_subscribe_returns_its_own_unsubscribe_and_active_follows() -> None:
    bus = EventBus()
    assert not bus.active and not bus and len(bus) == 0
    first: list[Event] = []
    second: list[Event] = []
    stop_first = bus.subscribe(first.append)
    stop_first_again = bus.subscribe(first.append)  # the same callback twice: two deliveries
    stop_second = bus.subscribe(second.append)
    assert bus.active and bus and len(bus) == 3
    bus.fired(timer(), 101.0)
    assert (len(first), len(second)) == (2, 1)
    stop_first()
    stop_first()  # a second call removes nothing more
    bus.fired(timer(), 102.0)
    assert (len(first), len(second)) == (3, 2)
    stop_first_again()
    stop_second()
    assert not bus.active and len(bus) == 0
    bus.fired(timer(), 103.0)
    assert (len(first), len(second)) == (3, 2)


def test_a_bus_nobody_listens_to_builds_no_event() -> None:
    class Untouchable:
        """A timer whose fields raise when read: an inactive bus must not read them."""

        @property
        def key(self) -> str:
            raise AssertionError("read")

        version = attempts = 1
        handler = "h"
        due = 0.0

    bus = EventBus()
    bus.fired(Untouchable(), 1.0)  # type: ignore[arg-type]
    bus.dead(Untouchable(), 1.0, None, "x")  # type: ignore[arg-type]


def test_a_callback_may_unsubscribe_while_an_event_is_delivered() -> None:
    bus = EventBus()
    seen: list[str] = []

    def once(event: Event) -> None:
        seen.append("once")
        stop()

    stop = bus.subscribe(once)
    bus.subscribe(lambda event: seen.append("other"))
    bus.fired(timer(), 1.0)
    bus.fired(timer(), 2.0)
    assert seen == ["once", "other", "other"]


def test_a_non_callable_is_refused() -> None:
    with pytest.raises(TypeError, match="callable"):
        EventBus().subscribe("print")  # type: ignore[arg-type]


def test_a_raising_callback_is_logged_once_and_breaks_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    bus = EventBus()

    def broken(event: Event) -> None:
        raise RuntimeError(f"looked up secret-{event.key}")

    before: list[Event] = []
    after: list[Event] = []
    bus.subscribe(before.append)
    bus.subscribe(broken)
    bus.subscribe(after.append)
    with caplog.at_level(logging.DEBUG, logger="wheel_engine.events"):
        for n in range(5):
            bus.fired(timer(key=f"k{n}"), 1.0)
    assert (len(before), len(after)) == (5, 5)  # the others got every event
    assert bus.failures == 5 and bus.active
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    debugs = [r for r in caplog.records if r.levelno == logging.DEBUG]
    assert len(warnings) == 1 and len(debugs) == 1  # once per subscription, not per event
    line = warnings[0].getMessage()
    assert "test_events" in line and "broken" in line and "RuntimeError" in line
    assert "'fired'" in line and "k0" in line
    assert "secret" not in line  # the exception's text may carry data: traceback at DEBUG only
    assert debugs[0].exc_info is not None and "secret-k0" in str(debugs[0].exc_info[1])


def test_each_subscription_is_logged_on_its_own_first_failure(
    caplog: pytest.LogCaptureFixture,
) -> None:
    bus = EventBus()

    def broken(event: Event) -> None:
        raise ValueError

    stop = bus.subscribe(broken)
    with caplog.at_level(logging.WARNING, logger="wheel_engine.events"):
        bus.fired(timer(), 1.0)
        stop()
        caplog.clear()
        bus.subscribe(broken)  # a new subscription of the same callback: its first failure is news
        bus.fired(timer(), 2.0)
        bus.fired(timer(), 3.0)
    assert len(caplog.records) == 1 and bus.failures == 3
