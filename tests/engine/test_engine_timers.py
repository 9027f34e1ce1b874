"""``TimerTable``: where each timer is, the retention window, and undoing a failed change."""

from __future__ import annotations

from wheel_engine.handlers import HandlerSpec, make_spec
from wheel_engine.model import TimerState
from wheel_engine.retry import RetryPolicy
from wheel_engine.timer import QUEUED, Timer
from wheel_engine.timers import TimerTable
from wheel_engine.wheel.entry import DETACHED

NOW = 1_000.0


def table(*handlers: str, retention: float = 60.0, max_retained: int = 10) -> TimerTable:
    registry: dict[str, HandlerSpec] = {
        name: make_spec(name, lambda firing: None, timeout=None, retry=RetryPolicy(), thread=False)
        for name in handlers
    }
    made = TimerTable(registry, tick=0.001, retention=retention, max_retained=max_retained)
    made.start_wheel(NOW)
    return made


def pending(key: str, handler: str = "h", version: int = 1, due: float = NOW + 5) -> Timer:
    return Timer(key, version, handler, due, None)


def test_a_pending_timer_is_in_the_wheel_or_parked() -> None:
    timers = table("h")
    known, unknown = pending("a"), pending("b", handler="later")
    timers.place(known)
    timers.place(unknown)
    assert known.where != DETACHED and len(timers.wheel) == 1
    assert timers.unhandled == {"later": {"b": unknown}} and timers.pending() == 2

    timers.handlers["later"] = timers.handlers["h"]
    assert timers.unpark("later") and not timers.unpark("later")
    assert len(timers.wheel) == 2 and timers.parked() == 0


def test_unplace_takes_a_timer_out_of_wherever_it_waits() -> None:
    timers = table("h")
    in_wheel, parked, queued = pending("a"), pending("b", handler="x"), pending("c")
    timers.place(in_wheel)
    timers.place(parked)
    queued.where = QUEUED  # as the starter leaves a due timer
    timers.queued = 1
    for timer in (in_wheel, parked, queued):
        timers.unplace(timer)
    assert timers.pending() == 0 and not timers.unhandled
    assert queued.where == DETACHED  # its queue entry is stale now


def test_the_window_forgets_by_age_and_by_count_oldest_first() -> None:
    timers = table("h", retention=60.0, max_retained=2)
    for n, key in enumerate(("a", "b", "c")):
        timer = pending(key)
        timers.timers[key] = timer
        timers.finish(timer, TimerState.SUCCEEDED, NOW + n)
    assert list(timers.finished) == ["b", "c"] and "a" not in timers.timers  # by count
    timers.purge_finished(NOW + 61.5)
    assert list(timers.finished) == ["c"]  # by age
    assert timers.forgotten(timers.timers["c"], NOW + 2 - 60.0) is False
    assert timers.forgotten(timers.timers["c"], NOW + 2) is True  # past it, not purged yet


def test_dead_timers_are_kept_out_of_the_window() -> None:
    timers = table("h", max_retained=0)
    timer = pending("d")
    timers.timers["d"] = timer
    timers.finish(timer, TimerState.DEAD, NOW)
    assert timers.dead == {"d": timer} and "d" in timers.timers and not timers.finished


def test_take_back_restores_the_version_it_replaced() -> None:
    timers = table("h")
    old = pending("k", version=1)
    timers.timers["k"] = old
    timers.insert(old)
    timers.unplace(old)
    new = pending("k", version=2)
    timers.replace(new, old)
    timers.insert(new)
    assert timers.take_back(new, old, NOW) is True  # old went back into the wheel: arm
    assert timers.timers["k"] is old and new.state is TimerState.CANCELED
    assert len(timers.wheel) == 1 and old.where != DETACHED


def test_take_back_of_a_fresh_key_forgets_it_and_uncancel_brings_a_cancel_back() -> None:
    timers = table("h")
    fresh = pending("k")
    timers.replace(fresh, None)
    timers.insert(fresh)
    assert timers.take_back(fresh, None, NOW) is False and "k" not in timers.timers

    cancelled = pending("c")
    timers.timers["c"] = cancelled
    timers.finish(cancelled, TimerState.CANCELED, NOW)
    assert timers.uncancel(cancelled) is True
    assert cancelled.state is TimerState.PENDING and "c" not in timers.finished
    assert len(timers.wheel) == 1


def test_a_timer_repr_names_it_without_recursing() -> None:
    timer = Timer("order:A1", 7, "h", 12.5, None)
    assert repr(timer) == "<Timer 'order:A1' v7 PENDING due 12.5>"
