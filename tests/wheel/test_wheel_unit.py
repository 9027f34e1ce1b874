"""Edge cases of the timing wheel."""

from __future__ import annotations

import random

import pytest

from wheel_engine.wheel import TimingWheel, WheelEntry
from wheel_engine.wheel.invariants import check_invariants, is_staged

EPOCH_MS = 1_767_225_600_000


def test_empty_wheel() -> None:
    wheel: TimingWheel[str] = TimingWheel(now_tick=10)
    assert len(wheel) == 0
    assert wheel.now == 10
    assert wheel.next_tick() is None
    assert wheel.advance(5) == []
    assert wheel.now == 10  # never goes back
    assert wheel.advance(EPOCH_MS) == []
    assert wheel.now == EPOCH_MS
    check_invariants(wheel)


def test_levels_must_be_positive() -> None:
    with pytest.raises(ValueError):
        TimingWheel(levels=0)


def test_entry_attributes_and_repr() -> None:
    wheel: TimingWheel[str] = TimingWheel()
    entry = wheel.insert(7, 3, "x")
    assert isinstance(entry, WheelEntry)
    assert (entry.tick, entry.seq, entry.item) == (7, 3, "x")
    assert entry.active
    assert "tick=7" in repr(entry)
    assert "len=1" in repr(wheel)


def test_remove_twice_and_after_firing() -> None:
    wheel: TimingWheel[str] = TimingWheel()
    a = wheel.insert(5, 0, "a")
    b = wheel.insert(6, 0, "b")
    assert wheel.remove(a) is True
    assert wheel.remove(a) is False
    assert not a.active
    assert wheel.advance(6) == ["b"]
    assert wheel.remove(b) is False
    assert len(wheel) == 0


def test_insert_in_the_past_comes_out_first_in_tick_seq_order() -> None:
    wheel: TimingWheel[str] = TimingWheel(now_tick=EPOCH_MS)
    wheel.insert(EPOCH_MS + 1, 0, "next")
    wheel.insert(EPOCH_MS, 2, "now-2")
    wheel.insert(EPOCH_MS - 1000, 9, "past")
    wheel.insert(EPOCH_MS, 1, "now-1")
    assert wheel.next_tick() == EPOCH_MS - 1000
    # Due items come out even when advancing to an earlier tick; later ones wait.
    assert wheel.advance(EPOCH_MS - 5) == ["past", "now-1", "now-2"]
    assert wheel.now == EPOCH_MS
    assert wheel.next_tick() == EPOCH_MS + 1
    assert wheel.advance(EPOCH_MS + 1) == ["next"]


def test_remove_due_entry() -> None:
    wheel: TimingWheel[str] = TimingWheel(now_tick=100)
    entry = wheel.insert(50, 0, "late")
    assert wheel.remove(entry) is True
    assert wheel.next_tick() is None
    assert wheel.advance(100) == []


def test_same_tick_ordered_by_seq_across_cascade() -> None:
    wheel: TimingWheel[int] = TimingWheel(now_tick=0)
    wheel.insert(4096 + 70, 5, 5)  # level 2, cascades twice
    wheel.insert(4096 + 70, 1, 1)
    wheel.advance(4096)  # now in the same level-1 block
    wheel.insert(4096 + 70, 3, 3)  # inserted directly into level 1
    wheel.advance(4096 + 64)
    wheel.insert(4096 + 70, 2, 2)  # inserted directly into level 0
    wheel.insert(4096 + 70, 4, 4)
    assert wheel.next_tick() == 4096 + 70
    assert wheel.advance(4096 + 69) == []
    assert wheel.advance(4096 + 70) == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("start", [0, 5, EPOCH_MS, EPOCH_MS + 63])
@pytest.mark.parametrize("levels", [1, 2, 6])
def test_horizon_boundary(start: int, levels: int) -> None:
    horizon = 64**levels
    wheel: TimingWheel[int] = TimingWheel(now_tick=start, levels=levels)
    ticks = [start + d for d in (horizon - 1, horizon, horizon + 1, 2 * horizon, 10 * horizon)]
    ticks += [(start // horizon + 1) * horizon + d for d in (-1, 0, 1)]
    ticks = [tick for tick in ticks if tick > start]  # a tick <= now is due at once
    for i, tick in enumerate(ticks):
        wheel.insert(tick, i, tick)
    check_invariants(wheel)
    fired: list[int] = []
    while wheel.next_tick() is not None:
        nxt = wheel.next_tick()
        assert nxt is not None
        assert wheel.advance(nxt - 1) == []
        out = wheel.advance(nxt)
        assert out and all(tick == nxt for tick in out)
        fired.extend(out)
        check_invariants(wheel)
    assert fired == sorted(ticks)


def test_overflow_remove_is_correct_and_heap_is_rebuilt() -> None:
    wheel: TimingWheel[int] = TimingWheel(now_tick=0, levels=1)
    entries = [wheel.insert(1000 + i, 0, i) for i in range(300)]
    for entry in entries[:250]:
        assert wheel.remove(entry)
    assert len(wheel) == 50
    assert wheel.next_tick() == 1250
    # lazy deletion keeps the heap within twice the live entries (plus a constant)
    assert len(wheel._overflow._heap) <= 2 * 50 + 64
    assert wheel.advance(10_000) == list(range(250, 300))
    assert wheel.next_tick() is None


def test_big_jump_then_small_steps() -> None:
    wheel: TimingWheel[int] = TimingWheel(now_tick=EPOCH_MS, levels=6)
    ticks = [EPOCH_MS + d for d in (1, 64, 4096, 3_600_000, 86_400_000, 400 * 86_400_000)]
    for tick in ticks:
        wheel.insert(tick, 0, tick)
    assert wheel.advance(EPOCH_MS + 86_400_000) == ticks[:5]
    assert wheel.next_tick() == ticks[5]
    assert wheel.advance(ticks[5] - 1) == []
    assert wheel.advance(ticks[5]) == [ticks[5]]


def test_next_tick_cache_follows_insert_and_remove() -> None:
    wheel: TimingWheel[int] = TimingWheel(now_tick=0)
    a = wheel.insert(500, 0, 0)
    assert wheel.next_tick() == 500
    b = wheel.insert(300, 0, 1)
    assert wheel.next_tick() == 300
    wheel.remove(b)
    assert wheel.next_tick() == 500
    wheel.remove(a)
    assert wheel.next_tick() is None


def _staged(wheel: TimingWheel[int], entry: WheelEntry[int]) -> bool:
    """Whether ``entry`` sits in a staging level (white-box, for these tests only)."""
    return is_staged(wheel, entry)


def test_partly_staged_slot_insert_remove_and_next_tick() -> None:
    wheel: TimingWheel[int] = TimingWheel(now_tick=0, budget=3)
    # Ten entries in level-2 slot 1 (ticks 4096 .. 8191), none earlier.
    entries = [wheel.insert(4096 + 500 * i + 70, i, i) for i in range(8)]
    entries += [wheel.insert(4096 + 5, 9, 9), wheel.insert(4096 + 5, 8, 8)]
    assert wheel.advance(1) == []  # ends with 3 moves of staging
    assert wheel.moves == 3
    staged = [e for e in entries if _staged(wheel, e)]
    live = [e for e in entries if not _staged(wheel, e)]
    assert len(staged) == 3 and len(live) == 7
    check_invariants(wheel)
    # Inserted into the slot being staged: straight to the staging levels, no move counted.
    late = wheel.insert(4096 + 5, 7, 7)
    assert _staged(wheel, late) and wheel.moves == 3
    assert wheel.next_tick() == 4096 + 5
    assert wheel.remove(late) and wheel.remove(staged[0]) and wheel.remove(live[0])
    assert not wheel.remove(staged[0])
    check_invariants(wheel)
    # The slot's live part emptied by removes: it still counts as occupied (staged entries).
    for entry in live[1:]:
        assert wheel.remove(entry)
    check_invariants(wheel)
    assert wheel.advance(2) == [] and wheel.moves == 3
    assert wheel.next_tick() == min(e.tick for e in entries if e.active)
    sixth = wheel.insert(4096 + 5, 6, 6)
    assert wheel.remove(staged[1]) and wheel.remove(staged[2])
    check_invariants(wheel)
    expected = sorted((e.tick, e.seq, e.item) for e in [*entries, sixth] if e.active)
    assert wheel.next_tick() == expected[0][0]
    # The crossing finds the staging unfinished: it finishes it, then swaps levels.
    assert wheel.advance(4095) == []
    check_invariants(wheel)
    assert wheel.work() is False
    fired: list[int] = []
    while (tick := wheel.next_tick()) is not None:
        assert wheel.advance(tick - 1) == []
        fired.extend(wheel.advance(tick))
        check_invariants(wheel)
    assert fired == [key[2] for key in expected]


@pytest.mark.parametrize("start", [0, EPOCH_MS])
def test_advance_tick_by_tick_moves_at_most_the_budget(start: int) -> None:
    """100k timers over 5,000 ticks: no advance moves more than its budget of entries (the
    items it hands out are not moves), where a whole-slot cascade would move ~80,000."""
    budget = 512
    rng = random.Random(7)
    wheel: TimingWheel[int] = TimingWheel(now_tick=start, budget=budget)
    for seq in range(100_000):
        wheel.insert(start + rng.randrange(1, 5001), seq, seq)
    fired = 0
    worst = 0
    for tick in range(start + 1, start + 5001):
        before = wheel.moves
        fired += len(wheel.advance(tick))
        worst = max(worst, wheel.moves - before)
    assert fired == 100_000 and len(wheel) == 0
    assert 0 < worst <= budget
    # Amortized: each entry moved at most levels - 1 times (here at most twice: from level 2).
    assert wheel.moves <= 2 * 100_000


def test_quiet_wheel_stages_through_work_not_at_the_crossing() -> None:
    def fill(wheel: TimingWheel[int]) -> None:
        for i in range(5000):
            wheel.insert(8192 + i % 4096, i, i)  # all in level-2 slot 2; slot 1 stays empty

    # Woken only at the crossing (jumping over the empty slot 1), the wheel stages the whole
    # slot in that one call...
    quiet: TimingWheel[int] = TimingWheel(now_tick=0, budget=100)
    fill(quiet)
    assert quiet.moves == 0  # not stageable yet: the cursor is not in the slot before
    assert quiet.next_work_tick() == 4096
    assert quiet.advance(8192) == [0, 4096]
    assert quiet.moves >= 5000
    # ... but advancing at next_work_tick(), then work() in idle time, spreads it: the crossing
    # then moves no more than a budget.
    wheel: TimingWheel[int] = TimingWheel(now_tick=0, budget=100)
    fill(wheel)
    assert wheel.work() is False  # nothing stageable yet
    assert wheel.advance(wheel.next_work_tick() or 0) == []
    assert wheel.next_work_tick() is None
    calls = 0
    while True:
        before = wheel.moves
        more = wheel.work(100)
        assert wheel.moves - before <= 100
        calls += 1
        if not more:
            break
    assert calls >= 48 and wheel.moves == 5000
    check_invariants(wheel)
    before = wheel.moves
    assert wheel.advance(8192) == [0, 4096]
    assert wheel.moves - before <= 100
    fired = [0, 4096]
    for tick in range(8193, 12288):
        before = wheel.moves
        fired.extend(wheel.advance(tick))
        assert wheel.moves - before <= 100
    assert sorted(fired) == list(range(5000))


def test_a_burst_of_inserts_stages_its_own_slots() -> None:
    """Inserts do a bounded share of staging, so a burst then a quiet spell needs no work()."""
    wheel: TimingWheel[int] = TimingWheel(now_tick=0, budget=100)
    for i in range(5000):
        before = wheel.moves
        wheel.insert(4096 + i % 4096, i, i)  # level-2 slot 1, next to the cursor's
        assert wheel.moves - before <= 128
    # Once the slot is being staged, later inserts into it go straight to its staging levels.
    assert wheel.moves == 64 and wheel.work() is False
    before = wheel.moves
    assert wheel.advance(4096) == [0, 4096]
    assert wheel.moves - before <= 100


def test_budget_must_be_positive() -> None:
    with pytest.raises(ValueError):
        TimingWheel(budget=0)
