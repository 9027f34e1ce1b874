"""The invariant check itself: it passes on a sound wheel and catches a misplaced entry."""

from __future__ import annotations

import pytest

from wheel_engine.wheel import TimingWheel
from wheel_engine.wheel.invariants import check_invariants, is_staged


def _wheel() -> TimingWheel[int]:
    wheel: TimingWheel[int] = TimingWheel(now_tick=0, budget=3)
    for i in range(10):
        wheel.insert(4096 + 500 * i, i, i)  # level-2 slot 1: staged 3 at a time
    wheel.insert(5, 0, 5)
    wheel.advance(1)
    return wheel


def test_a_sound_wheel_passes() -> None:
    check_invariants(_wheel())


def test_an_entry_in_the_wrong_slot_is_caught() -> None:
    wheel = _wheel()
    entry = wheel.insert(7, 0, 7)
    # Move it by hand into the slot of tick 8: its slot no longer matches slot_for(tick).
    level = wheel._by_ident[entry.where]
    level.slots[7].remove(entry)
    entry.pos = len(level.slots[8])
    level.slots[8].append(entry)
    level.occupied |= 1 << 8
    with pytest.raises(AssertionError):
        check_invariants(wheel)


def test_a_staged_entry_in_the_wrong_staging_level_is_caught() -> None:
    wheel = _wheel()
    entry = wheel.insert(4096 + 3, 0, 3)  # into the slot being staged
    assert is_staged(wheel, entry)
    entry.tick += 64  # now level_for(start, tick) says staging level 1, not 0
    with pytest.raises(AssertionError):
        check_invariants(wheel)


def test_a_stale_occupancy_bit_is_caught() -> None:
    wheel = _wheel()
    wheel._levels[0].occupied |= 1 << 40
    with pytest.raises(AssertionError):
        check_invariants(wheel)
