"""Property tests: the timing wheel against a sorted-list reference model.

After every step `check_invariants` recomputes the place of every entry with the production
slot functions (`slots.level_for`, `slots.slot_for`), so the placement the hot loops inline is
checked against them.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
)
from sortedcontainers import SortedList  # type: ignore[import-untyped]

from wheel_engine.wheel import TimingWheel, WheelEntry
from wheel_engine.wheel.invariants import check_invariants

EPOCH_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z in milliseconds
BUDGETS = [1, 1, 1, 2, 3, 512]
STARTS = [0, 1, 63, 64, 4095, EPOCH_MS, EPOCH_MS + 4095, (1 << 36) - 1, (1 << 42) - 2]

# Offsets from ``now`` around slot and level boundaries (64, 4096, 64**3 ... and their multiples).
BOUNDARY_DELTAS = sorted(
    {m * (1 << (6 * k)) + d for k in range(1, 7) for m in (1, 2, 63, 64, 65) for d in (-1, 0, 1)}
)

# (mode, a, b, c) turned into a tick relative to the current ``now`` by ``pick_tick``.
TICK_SPEC = st.one_of(
    st.tuples(st.just("near"), st.integers(-70, 70), st.just(0), st.just(0)),
    st.tuples(st.just("boundary"), st.sampled_from(BOUNDARY_DELTAS), st.just(0), st.just(0)),
    # an aligned block edge: ((now >> 6k) + m) << 6k, plus -1, 0 or +1
    st.tuples(
        st.just("aligned"),
        st.integers(0, 6),
        st.sampled_from([0, 1, 2, 63, 64, 65]),
        st.integers(-1, 1),
    ),
    st.tuples(st.just("far"), st.integers(0, 1 << 40), st.just(0), st.just(0)),
    st.tuples(st.just("past"), st.integers(1, 10_000), st.just(0), st.just(0)),
)


def pick_tick(now: int, spec: tuple[str, int, int, int]) -> int:
    mode, a, b, c = spec
    if mode in ("near", "boundary", "far"):
        return now + a
    if mode == "aligned":
        shift = 6 * a
        return (((now >> shift) + b) << shift) + c
    return now - a  # past


class WheelMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.wheel: TimingWheel[int] = TimingWheel(0)
        self.model: SortedList[tuple[int, int, int]] = SortedList()
        self.entries: list[WheelEntry[int]] = []
        self.live: dict[int, tuple[int, int, int]] = {}
        self.fired: set[int] = set()
        self.now = 0

    @initialize(
        start=st.sampled_from(STARTS),
        levels=st.sampled_from([1, 2, 3, 6]),
        budget=st.sampled_from(BUDGETS),
    )
    def setup(self, start: int, levels: int, budget: int) -> None:
        # Tiny staging budgets leave staging unfinished at most steps, so inserts and removes
        # hit slots being staged and crossings arrive with staging incomplete.
        self.wheel = TimingWheel(now_tick=start, levels=levels, budget=budget)
        self.now = start

    @rule(spec=TICK_SPEC, seq=st.integers(0, 3))
    def insert(self, spec: tuple[str, int, int, int], seq: int) -> None:
        tick = pick_tick(self.now, spec)
        ident = len(self.entries)
        entry = self.wheel.insert(tick, seq, ident)
        assert (entry.tick, entry.seq, entry.item) == (tick, seq, ident)
        self.entries.append(entry)
        key = (tick, seq, ident)
        self.live[ident] = key
        self.model.add(key)

    @rule(spec=TICK_SPEC, count=st.integers(2, 20), stride=st.sampled_from([0, 1, 5, 64, 4097]))
    def insert_burst(self, spec: tuple[str, int, int, int], count: int, stride: int) -> None:
        """Several entries in one or a few slots: a staged slot with more than a budget's worth."""
        tick = pick_tick(self.now, spec)
        for i in range(count):
            self.insert_at(tick + i * stride, i % 3)

    def insert_at(self, tick: int, seq: int) -> None:
        ident = len(self.entries)
        entry = self.wheel.insert(tick, seq, ident)
        self.entries.append(entry)
        key = (tick, seq, ident)
        self.live[ident] = key
        self.model.add(key)

    @rule(count=st.integers(1, 12))
    def remove_recent(self, count: int) -> None:
        """Remove the latest entries (often a burst): can empty the live part of a slot whose
        staging has begun, or everything staged in it."""
        for ident in range(max(0, len(self.entries) - count), len(self.entries)):
            key = self.live.pop(ident, None)
            assert self.wheel.remove(self.entries[ident]) == (key is not None)
            if key is not None:
                self.model.remove(key)

    @rule(budget=st.integers(1, 6))
    def work(self, budget: int) -> None:
        """Staging work between advances: it never hands anything out or moves ``now``."""
        before = self.wheel.moves
        more = self.wheel.work(budget)
        assert isinstance(more, bool)
        assert self.wheel.moves - before <= budget
        assert self.wheel.now == self.now

    @rule(data=st.data())
    def remove(self, data: st.DataObject) -> None:
        # No precondition (they make hypothesis retry rule draws): nothing to remove is a no-op.
        if not self.entries:
            return
        ident = data.draw(st.integers(0, len(self.entries) - 1))
        removed = self.wheel.remove(self.entries[ident])
        key = self.live.pop(ident, None)
        assert removed == (key is not None)
        if key is not None:
            self.model.remove(key)
        assert self.wheel.remove(self.entries[ident]) is False

    @rule(spec=TICK_SPEC)
    def advance(self, spec: tuple[str, int, int, int]) -> None:
        self._advance(pick_tick(self.now, spec))

    @rule(extra=st.integers(-1, 1))
    def advance_to_next(self, extra: int) -> None:
        """Advance to just before, exactly to, or just past the earliest live tick."""
        self._advance((self.model[0][0] if self.model else self.now) + extra)

    @rule(budget=st.integers(1, 3), extra=st.integers(-1, 0))
    def work_then_advance_to_next(self, budget: int, extra: int) -> None:
        """A little staging, then a crossing into the slot of the earliest entry: the crossing
        finds that slot's staging begun but unfinished."""
        self.wheel.work(budget)
        self.advance_to_next(extra)

    def _advance(self, to_tick: int) -> None:
        horizon = max(self.now, to_tick)
        out = self.wheel.advance(to_tick)
        expected = []
        while self.model and (self.model[0][0] <= horizon):
            expected.append(self.model.pop(0))
        # Same items, in (tick, seq) order (ties on equal (tick, seq) may come out either way).
        assert sorted(out) == sorted(key[2] for key in expected)
        keys = [self.live.pop(ident) for ident in out]
        assert [k[:2] for k in keys] == [k[:2] for k in expected]
        assert not self.fired.intersection(out)
        self.fired.update(out)
        self.now = horizon
        assert self.wheel.now == horizon

    @invariant()
    def matches_model(self) -> None:
        assert len(self.wheel) == len(self.model)
        assert self.wheel.next_tick() == (self.model[0][0] if self.model else None)
        check_invariants(self.wheel)


WheelMachine.TestCase.settings = settings(
    max_examples=500,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestWheelMachine = WheelMachine.TestCase


@settings(max_examples=500, deadline=None)
@given(
    start=st.sampled_from(STARTS),
    levels=st.sampled_from([1, 2, 6]),
    budget=st.sampled_from(BUDGETS),
    timers=st.lists(st.tuples(TICK_SPEC, st.integers(0, 1 << 20)), max_size=60),
    steps=st.lists(TICK_SPEC, min_size=1, max_size=12),
)
def test_bulk_fires_everything_once_in_order(
    start: int,
    levels: int,
    budget: int,
    timers: list[tuple[tuple[str, int, int, int], int]],
    steps: list[tuple[str, int, int, int]],
) -> None:
    """Insert a batch, advance in arbitrary steps, then far past everything: all come out once,
    in (tick, seq) order overall, and none before its tick."""
    wheel: TimingWheel[tuple[int, int, int]] = TimingWheel(
        now_tick=start, levels=levels, budget=budget
    )
    keys = []
    for ident, (spec, seq) in enumerate(timers):
        key = (pick_tick(start, spec), seq, ident)
        keys.append(key)
        wheel.insert(key[0], key[1], key)
    fired: list[tuple[int, int, int]] = []
    now = start
    for spec in steps:
        to_tick = pick_tick(now, spec)
        out = wheel.advance(to_tick)
        now = max(now, to_tick)
        assert all(key[0] <= now for key in out)
        fired.extend(out)
        check_invariants(wheel)
        remaining = [key[0] for key in keys if key not in set(fired)]
        assert wheel.next_tick() == (min(remaining) if remaining else None)
    fired.extend(wheel.advance(max([now, *[key[0] for key in keys]])))
    assert len(wheel) == 0 and wheel.next_tick() is None
    assert sorted(fired) == sorted(keys)
    assert [key[:2] for key in fired] == sorted(key[:2] for key in keys)
