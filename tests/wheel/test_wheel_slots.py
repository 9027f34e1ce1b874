"""Table tests of the slot arithmetic (``wheel_engine.wheel.slots``)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wheel_engine.wheel.slots import (
    SLOT_BITS,
    SLOT_MASK,
    SLOTS,
    level_for,
    lowest_slot,
    slot_for,
    slot_start,
)

EPOCH_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z in ms: a multiple of 64


def test_constants() -> None:
    assert (SLOT_BITS, SLOTS, SLOT_MASK) == (6, 64, 63)


@pytest.mark.parametrize(
    ("elapsed", "tick", "level"),
    [
        (0, 0, 0),  # equal: level 0
        (1, 63, 0),  # differ only in the low six bits
        (1, 64, 1),  # bit 6: the first level-1 tick
        (64, 127, 0),  # same level-1 slot as the cursor
        (63, 64, 1),  # one tick ahead, but across a slot boundary
        (1, 4095, 1),
        (1, 4096, 2),  # bit 12
        (4095, 4096, 2),  # one tick ahead, across a level-2 boundary
        (4096 + 70, 4180, 0),  # the module docstring's table
        (4096 + 70, 4300, 1),
        (4096 + 70, 12288, 2),
        (1, 1 << 35, 5),
        (1, (1 << 36) - 1, 5),  # the last tick of a 6-level wheel's horizon
        (1, 1 << 36, 6),  # past it: the overflow heap of a 6-level wheel
        (EPOCH_MS + 1, EPOCH_MS + 5, 0),  # design.md's worked example: A .. E
        (EPOCH_MS + 1, EPOCH_MS + 100, 1),
        (EPOCH_MS + 1, EPOCH_MS + 1_800_000, 3),
        (EPOCH_MS + 1, EPOCH_MS + 2_592_000_000, 5),
        (EPOCH_MS + 1, EPOCH_MS + 94_608_000_000, 6),
    ],
)
def test_level_for(elapsed: int, tick: int, level: int) -> None:
    assert level_for(elapsed, tick) == level


@pytest.mark.parametrize(
    ("tick", "level", "slot"),
    [
        (0, 0, 0),
        (63, 0, 63),
        (64, 0, 0),  # level 0 wraps every 64 ticks
        (64, 1, 1),
        (4095, 1, 63),
        (4096, 1, 0),
        (4096, 2, 1),
        (4300, 1, 3),
        (12288, 2, 3),
        ((1 << 36) - 1, 5, 63),
        (EPOCH_MS, 0, 0),  # the epoch tick's slots per level: 0, 32, 42, 54, 54, 45
        (EPOCH_MS, 1, 32),
        (EPOCH_MS, 2, 42),
        (EPOCH_MS, 3, 54),
        (EPOCH_MS, 4, 54),
        (EPOCH_MS, 5, 45),
        (EPOCH_MS + 100, 1, 33),
        (EPOCH_MS + 1_800_000, 3, 61),
        (EPOCH_MS + 2_592_000_000, 5, 48),
    ],
)
def test_slot_for(tick: int, level: int, slot: int) -> None:
    assert slot_for(tick, level) == slot


@pytest.mark.parametrize(
    ("occupied", "slot"),
    [(1, 0), (2, 1), (0b1011000, 3), (1 << 63, 63), ((1 << 64) - 1, 0), (1 << 33 | 1 << 61, 33)],
)
def test_lowest_slot(occupied: int, slot: int) -> None:
    assert lowest_slot(occupied) == slot


@pytest.mark.parametrize(
    ("elapsed", "level", "slot", "start"),
    [
        (1, 0, 5, 5),
        (6, 1, 1, 64),  # the class docstring's example: level-1 slot 1 is [64, 128)
        (70, 0, 10, 74),  # level 0 keeps the cursor's level-1 slot
        (1, 2, 1, 4096),
        (4097, 1, 0, 4096),  # the block of the cursor, not the next one
        (EPOCH_MS + 6, 1, 33, EPOCH_MS + 64),  # design.md's worked example, step 2
        (EPOCH_MS + 101, 3, 61, EPOCH_MS + 1_660_928),
        (EPOCH_MS + 101, 5, 48, EPOCH_MS + 2_300_925_952),
    ],
)
def test_slot_start(elapsed: int, level: int, slot: int, start: int) -> None:
    assert slot_start(elapsed, level, slot) == start


@given(elapsed=st.integers(0, 1 << 44), delta=st.integers(0, 1 << 40))
def test_level_for_is_the_lowest_level_above_which_the_two_agree(elapsed: int, delta: int) -> None:
    """The definition, spelled out: ``tick`` sits in the lowest level ``n`` such that it agrees
    with ``elapsed`` in every bit above level ``n``, and in a slot at or after the cursor's."""
    tick = elapsed + delta
    level = level_for(elapsed, tick)
    up = (level + 1) * SLOT_BITS
    assert tick >> up == elapsed >> up
    assert level == 0 or tick >> (up - SLOT_BITS) != elapsed >> (up - SLOT_BITS)
    assert slot_for(tick, level) >= slot_for(elapsed, level)
    assert slot_start(elapsed, level, slot_for(tick, level)) <= tick
