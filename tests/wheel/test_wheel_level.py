"""A live slot's earliest tick is kept between asks (``Level.mins``), and stays exact."""

from __future__ import annotations

from wheel_engine.wheel import TimingWheel
from wheel_engine.wheel.invariants import check_invariants
from wheel_engine.wheel.level import UNKNOWN

#: The timers land in level 3 slot 2 (ticks 524288 .. 786431) from tick 0: not staged while
#: the cursor is in slot 0 (only the slot right after it is).
FAR = 2 << 18


def far_wheel(count: int) -> TimingWheel[int]:
    wheel: TimingWheel[int] = TimingWheel(now_tick=0, budget=1)
    for i in range(count):
        wheel.insert(FAR + 1000 + 7 * i, i, i)
    wheel.advance(0)  # as the engine does before asking: the wheel's own cache is stale
    return wheel


def test_the_earliest_of_a_far_slot_is_kept_after_one_scan() -> None:
    wheel = far_wheel(500)
    level = wheel._levels[3]
    assert level.mins[2] == UNKNOWN  # nothing asked yet: no scan was done
    assert wheel.next_tick() == FAR + 1000
    assert level.mins[2] == FAR + 1000  # the scan's result is kept for the next ask
    check_invariants(wheel)


def test_an_earlier_insert_updates_the_kept_earliest() -> None:
    wheel = far_wheel(50)
    wheel.next_tick()
    wheel.insert(FAR + 10, 99, 99)
    assert wheel._levels[3].mins[2] == FAR + 10
    wheel.advance(5)  # forgets the wheel's own cache, not the slot's
    assert wheel.next_tick() == FAR + 10
    check_invariants(wheel)


def test_removing_the_earliest_forgets_it_and_the_next_ask_is_exact() -> None:
    wheel = far_wheel(50)
    first = wheel.insert(FAR + 10, 99, 99)
    assert wheel.next_tick() == FAR + 10
    wheel.remove(first)
    assert wheel._levels[3].mins[2] == UNKNOWN
    assert wheel.next_tick() == FAR + 1000
    check_invariants(wheel)


def test_removing_another_entry_keeps_the_earliest() -> None:
    wheel = far_wheel(50)
    later = wheel.insert(FAR + 3000, 99, 99)
    wheel.next_tick()
    wheel.remove(later)
    assert wheel._levels[3].mins[2] == FAR + 1000
    check_invariants(wheel)


def test_staging_and_handing_out_forget_the_earliest() -> None:
    wheel = far_wheel(300)
    wheel.next_tick()
    wheel.advance(FAR - 1)  # the cursor enters the slot before: slot 2 gets staged
    while wheel.work(50):
        check_invariants(wheel)
    assert wheel.next_tick() == FAR + 1000
    out = wheel.advance(FAR + 1000)
    assert out == [0]
    assert wheel.next_tick() == FAR + 1007
    check_invariants(wheel)
