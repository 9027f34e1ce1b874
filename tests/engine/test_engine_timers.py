"""``TimerTable``: where each timer is, the retention window, and undoing a failed change."""

from __future__ import annotations

import pytest

from wheel_engine.errors import IllegalTransition
from wheel_engine.handlers import HandlerSpec, make_spec
from wheel_engine.model import TimerState
from wheel_engine.retention import COMPACT_SLACK
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
        timer.charge(NOW + n)  # only a running timer succeeds (Timer's transitions)
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


def test_a_voided_version_stays_cancelled_when_its_cancel_is_undone() -> None:
    # A cancel submitted while the key's first schedule commits fails with it: the schedule's
    # failure voids the version first, then the cancel's failure must not bring it back.
    timers = table("h")
    fresh = pending("k")
    timers.replace(fresh, None)
    timers.insert(fresh)
    timers.unplace(fresh)
    timers.finish(fresh, TimerState.CANCELED, NOW)  # the cancel, in memory at once
    assert timers.take_back(fresh, None, NOW) is False and "k" not in timers.timers
    assert timers.uncancel(fresh) is False
    assert fresh.state is TimerState.CANCELED and len(timers.wheel) == 0
    with pytest.raises(IllegalTransition):
        fresh.uncancel()


def test_forget_takes_the_current_version_out_of_every_index() -> None:
    timers = table("h")
    dead = pending("d")
    timers.replace(dead, None)
    timers.finish(dead, TimerState.DEAD, NOW)
    assert timers.forget(dead) is True and "d" not in timers.timers and "d" not in timers.dead
    waiting = pending("w")
    timers.replace(waiting, None)
    timers.insert(waiting)
    assert timers.forget(waiting) is True and len(timers.wheel) == 0
    assert timers.forget(waiting) is False  # not the key's timer any more


def test_unplacing_an_old_version_leaves_the_new_one_parked() -> None:
    timers = table()  # no handler registered: pending timers are parked
    old, new = pending("k", "gone", version=1), pending("k", "gone", version=2)
    timers.replace(new, old)
    timers.place(new)
    assert timers.parked() == 1
    timers.unplace(old)  # detached, not in the parking: it must not take the new version out
    assert timers.parked() == 1


def test_a_timer_repr_names_it_without_recursing() -> None:
    timer = Timer("order:A1", 7, "h", 12.5, None)
    assert repr(timer) == "<Timer 'order:A1' v7 PENDING due 12.5>"


def finished(timers: TimerTable, key: str, at: float, version: int = 1) -> Timer:
    """A new version of ``key``, replacing the one there, SUCCEEDED at ``at``."""
    timer = pending(key, version=version)
    previous = timers.timers.get(key)
    if previous is not None and previous.state is TimerState.PENDING:
        timers.unplace(previous)
    timers.replace(timer, previous)
    timer.charge(at)  # only a running timer succeeds (Timer's transitions)
    timers.finish(timer, TimerState.SUCCEEDED, at)
    return timer


def test_a_replaced_version_leaves_a_stale_entry_that_does_not_count() -> None:
    timers = table("h", retention=60.0, max_retained=2)
    finished(timers, "a", NOW)
    latest = finished(timers, "a", NOW + 1, version=2)  # a's first entry is stale now
    finished(timers, "b", NOW + 2)
    assert len(timers.finished) == 2 and list(timers.finished) == ["a", "b"]
    finished(timers, "c", NOW + 3)  # by count: only the live "a" goes, the stale entry is dropped
    assert list(timers.finished) == ["b", "c"] and "a" not in timers.timers
    assert timers.finished.entries() == 2

    timers = table("h", retention=60.0, max_retained=2)
    finished(timers, "a", NOW)
    latest = finished(timers, "a", NOW + 30, version=2)
    timers.purge_finished(NOW + 61)  # by age: the stale entry goes, the newer version stays
    assert list(timers.finished) == ["a"] and timers.timers["a"] is latest
    timers.purge_finished(NOW + 91)
    assert not timers.finished and not timers.timers and timers.finished.entries() == 0


def test_an_uncancelled_timer_that_finishes_later_is_retained_once() -> None:
    timers = table("h", retention=60.0, max_retained=10)
    again = pending("c")
    timers.timers["c"] = again
    timers.finish(again, TimerState.CANCELED, NOW)
    assert timers.uncancel(again) and not timers.finished  # its entry is stale now
    finished(timers, "b", NOW + 1)
    timers.unplace(again)
    again.charge(NOW + 30)  # only a running timer succeeds (Timer's transitions)
    timers.finish(again, TimerState.SUCCEEDED, NOW + 30)  # a second entry, at the back
    assert list(timers.finished) == ["b", "c"] and len(timers.finished) == 2
    timers.purge_finished(NOW + 62)  # the stale front entry must not hold "b" back
    assert list(timers.finished) == ["c"] and "b" not in timers.timers


def test_a_version_taken_back_after_it_succeeded_leaves_the_window() -> None:
    timers = table("h", max_retained=2)
    old = finished(timers, "k", NOW)
    new = finished(timers, "k", NOW + 1, version=2)  # ran before its commit failed
    assert timers.take_back(new, old, NOW + 2) is False
    assert list(timers.finished) == ["k"] and len(timers.finished) == 1
    fresh = finished(timers, "f", NOW + 3)
    assert timers.take_back(fresh, None, NOW + 4) is False
    assert len(timers.finished) == 1 and "f" not in timers.timers


def test_stale_entries_are_compacted_away() -> None:
    timers = table("h", retention=3600.0, max_retained=10)
    for version in range(1, 3 * COMPACT_SLACK):
        finished(timers, "k", NOW + version * 1e-3, version=version)
    assert len(timers.finished) == 1 and list(timers.finished) == ["k"]
    assert timers.finished.entries() <= 2 + COMPACT_SLACK + 1
