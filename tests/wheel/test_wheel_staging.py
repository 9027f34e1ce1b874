"""The staged cascade walked through in ``wheel_engine.wheel.staging``'s docstring, step by step."""

from __future__ import annotations

from wheel_engine.wheel import TimingWheel
from wheel_engine.wheel.invariants import check_invariants, is_staged

TICKS = [8192 + 2 * i for i in range(2000)]  # all in live level 2, slot 2


def test_the_worked_example_of_one_staged_cascade() -> None:
    wheel: TimingWheel[int] = TimingWheel(now_tick=0, budget=512)
    entries = [wheel.insert(tick, 0, tick) for tick in TICKS]
    # 1. Slot 1 of level 2 is empty: nothing is stageable yet; advance by its start.
    assert wheel.moves == 0
    assert wheel.next_work_tick() == 4096
    # 2. advance(4096) stages a budget; three more budgets finish the slot.
    assert wheel.advance(4096) == []
    assert wheel.moves == 512
    staged = [e for e in entries if is_staged(wheel, e)]
    assert len(staged) == 512
    moved = []
    while True:
        before = wheel.moves
        more = wheel.work()
        moved.append(wheel.moves - before)
        if not more:
            break
    assert moved == [512, 512, 464]
    assert all(is_staged(wheel, e) for e in entries)
    check_invariants(wheel)
    # 3. The crossing swaps the staging levels in: no entry moves, tick 8192 comes out.
    before = wheel.moves
    assert wheel.advance(8192) == [8192]
    check_invariants(wheel)
    # 4. ... and the end of that call stages the next level-1 slot (ticks 8256 .. 8319).
    assert wheel.moves - before == 32
    level0 = [e for e in entries[1:32] if not is_staged(wheel, e)]
    assert len(level0) == 31  # ticks 8194 .. 8254: live level 0
    assert all(is_staged(wheel, e) for e in entries[32:64])  # ticks 8256 .. 8318
    assert wheel.next_tick() == 8194


def test_without_work_the_crossing_finishes_the_staging() -> None:
    """The exception of the work contract: a crossing into an unfinished staged slot moves the
    rest of it in that one call."""
    wheel: TimingWheel[int] = TimingWheel(now_tick=0, budget=512)
    for tick in TICKS:
        wheel.insert(tick, 0, tick)
    wheel.advance(4096)
    before = wheel.moves
    assert wheel.advance(8192) == [8192]
    assert wheel.moves - before == 2000 - 512 + 32  # the rest of slot 2, then level-1 slot 129
    check_invariants(wheel)


def test_the_swapped_in_levels_hold_the_slot_at_its_final_depth() -> None:
    wheel: TimingWheel[int] = TimingWheel(now_tick=0, budget=512)
    for tick in TICKS:
        wheel.insert(tick, 0, tick)
    wheel.advance(4096)
    while wheel.work():
        pass
    assert wheel.advance(8192) == [8192]
    level0, level1 = wheel._levels[0], wheel._levels[1]
    assert sum(map(len, level0.slots)) == 31  # 8194 .. 8254
    sizes = [len(bucket) for bucket in level1.slots]
    # slot 1 was staged again right away (the next level-1 slot after the cursor's)
    assert sizes[2:62] == [32] * 60 and sizes[62] == 16 and sizes[1] == 0


def test_a_zero_budget_moves_nothing_and_says_whether_work_remains() -> None:
    """``work(0)`` is how the engine asks whether staging work is left (``trigger.py``): it must
    not move anything, however much is left to stage (a slot of 2,000 here)."""
    wheel: TimingWheel[int] = TimingWheel(now_tick=0, budget=512)
    for tick in TICKS:
        wheel.insert(tick, 0, tick)
    wheel.advance(4096)  # stages one budget of slot 2; 1,488 entries are left to stage
    before = wheel.moves
    assert wheel.work(0) is True
    assert wheel.moves == before
    check_invariants(wheel)
