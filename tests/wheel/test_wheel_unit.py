"""Edge cases of the timing wheel."""

from __future__ import annotations

import pytest

from wheel_engine.wheel import TimingWheel, WheelEntry

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
    wheel.check_invariants()


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
    wheel.check_invariants()
    fired: list[int] = []
    while wheel.next_tick() is not None:
        nxt = wheel.next_tick()
        assert nxt is not None
        assert wheel.advance(nxt - 1) == []
        out = wheel.advance(nxt)
        assert out and all(tick == nxt for tick in out)
        fired.extend(out)
        wheel.check_invariants()
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
