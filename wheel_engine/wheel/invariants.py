"""The wheel's internal invariants as one check, for tests (O(n); never called by the wheel).

:func:`check_invariants` recomputes every entry's place with the production slot functions
(:func:`~.slots.level_for`, :func:`~.slots.slot_for`), so it also checks the two hot loops that
inline them (``TimingWheel._place`` and ``level.spread``).
"""

from __future__ import annotations

from typing import Any

from .entry import DUE, WheelEntry
from .level import UNKNOWN, Level
from .slots import SLOT_BITS, SLOT_MASK, level_for, slot_for
from .wheel import TimingWheel


def is_staged(wheel: TimingWheel[Any], entry: WheelEntry[Any]) -> bool:
    """Whether ``entry`` sits in a staging level of ``wheel``."""
    return entry.where >= 0 and wheel._by_ident[entry.where].staging_for > 0


def check_invariants(wheel: TimingWheel[Any]) -> None:
    """Raise AssertionError if an internal invariant of ``wheel`` is broken.

    Checked: every entry is where its ``where`` and ``slot`` say, at the place the slot
    functions give relative to the cursor (live levels) or to its staged slot's start (staging
    levels); occupancy bits match the slots; the staged slot of a level is the one right after
    the cursor's own; the overflow heap is beyond the top level; the counts add up; a slot's
    kept earliest tick (``Level.mins``) is exact, and level 0 keeps none.
    """
    elapsed = wheel._elapsed
    staging = wheel._staging
    count = len(wheel._due) + len(wheel._overflow)
    for entry in wheel._due:
        assert entry.where == DUE and entry.tick < elapsed, entry
    assert [level.ident for level in wheel._by_ident] == list(range(len(wheel._by_ident)))
    for number, level in enumerate(wheel._levels):
        assert level.staging_for == 0 and level.shift == number * SLOT_BITS, number
        staged = staging.staged_count[number]
        staged_slot = staging.staged_key[number] & SLOT_MASK if staged else -1
        _check_mins(level, keeps=number > 0)
        for slot, bucket in enumerate(level.slots):
            occupied = bool(bucket) or slot == staged_slot
            assert occupied == bool(level.occupied >> slot & 1), (number, slot)
            for entry in bucket:
                count += 1
                assert entry.where == level.ident and entry.tick >> level.shift & SLOT_MASK == slot
                assert bucket[entry.pos] is entry, entry
                assert entry.tick >= elapsed, (entry, elapsed)
                assert level_for(elapsed, entry.tick) == number, (entry, elapsed, number)
                assert slot_for(entry.tick, number) == slot, entry
                if number:
                    assert slot_for(entry.tick, number) != slot_for(elapsed, number), entry
    for owner in range(1, wheel.levels):
        count += _check_staged_slot(wheel, owner)
    top = wheel.levels * SLOT_BITS
    for entry in wheel._overflow.live():
        assert entry.tick >> top > elapsed >> top, (entry, elapsed)
    assert count == len(wheel), (count, len(wheel))


def _check_staged_slot(wheel: TimingWheel[Any], owner: int) -> int:
    """Check level ``owner``'s staging levels; return how many entries they hold."""
    staging = wheel._staging
    key = staging.staged_key[owner]
    shift = owner * SLOT_BITS
    start = key << shift
    staged = 0
    for number, lower in enumerate(staging.staging_levels[owner]):
        assert lower.staging_for == owner and lower.shift == number * SLOT_BITS, owner
        _check_mins(lower, keeps=number > 0)
        for slot, bucket in enumerate(lower.slots):
            assert bool(bucket) == bool(lower.occupied >> slot & 1), (owner, slot)
            for entry in bucket:
                staged += 1
                assert entry.where == lower.ident and entry.tick >> lower.shift & SLOT_MASK == slot
                assert bucket[entry.pos] is entry, entry
                assert entry.tick >> shift == key, (entry, owner, key)
                assert level_for(start, entry.tick) == number, (entry, owner, number)
                assert slot_for(entry.tick, number) == slot, entry
    assert staged == staging.staged_count[owner], (owner, staged)
    if staged:
        # the staged slot is the one right after the cursor's own, in the same block
        elapsed = wheel._elapsed
        assert key == (elapsed >> shift) + 1, (owner, key, elapsed)
        assert key >> SLOT_BITS == elapsed >> (shift + SLOT_BITS), (owner, key, elapsed)
    return staged


def _check_mins(level: Level[Any], keeps: bool) -> None:
    """Each slot's kept earliest tick is UNKNOWN or exact; all UNKNOWN unless ``keeps``."""
    for slot, best in enumerate(level.mins):
        if best != UNKNOWN:
            assert keeps, (level.ident, slot, best)
            assert best == min(entry.tick for entry in level.slots[slot]), (level.ident, slot)
