"""``entry.hand_out``: a slot handed out whole comes out in (tick, seq) order, ties kept."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from wheel_engine.wheel.entry import DETACHED, ItemEntry, WheelEntry, hand_out


@given(st.lists(st.tuples(st.integers(0, 9), st.integers(0, 9))))
def test_entries_come_out_by_tick_then_seq_keeping_ties_in_order(
    pairs: list[tuple[int, int]],
) -> None:
    entries: list[WheelEntry[int]] = [
        ItemEntry(tick, seq, i) for i, (tick, seq) in enumerate(pairs)
    ]
    for entry in entries:
        entry.where = 0  # as if held by a level
    out: list[int] = []
    hand_out(entries, out)
    # sorted() is stable: equal (tick, seq) pairs keep their order, as the wheel's sort did.
    assert out == sorted(range(len(pairs)), key=lambda i: pairs[i])
    assert all(entry.where == DETACHED for entry in entries)


def test_large_ticks_and_seqs() -> None:
    big = 1 << 62
    entries: list[WheelEntry[str]] = [
        ItemEntry(big + 1, 1, "c"),
        ItemEntry(big, 1 << 40, "b"),
        ItemEntry(big, 3, "a"),
        ItemEntry(big + 1, 0, "d"),
    ]
    out: list[str] = []
    hand_out(entries, out)
    assert out == ["a", "b", "d", "c"]
