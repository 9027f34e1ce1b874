"""The hierarchical hashed timing wheel: pure, synchronous, generic over the item type."""

from __future__ import annotations

from operator import attrgetter
from typing import Generic, TypeVar

from .entry import DETACHED, DUE, OVERFLOW, WheelEntry
from .level import SLOT_BITS, SLOT_MASK, Level
from .overflow import OverflowHeap

T = TypeVar("T")

_by_seq = attrgetter("seq")
_by_tick_seq = attrgetter("tick", "seq")


class TimingWheel(Generic[T]):
    """Items keyed by an integer tick, handed out in ``(tick, seq)`` order by :meth:`advance`.

    Layout. Internally the wheel keeps a cursor ``elapsed = now + 1``: the first tick not yet
    handed out. An entry with ``tick >= elapsed`` lives in level ``n`` when the highest bit in
    which ``tick`` and ``elapsed`` differ is in bits ``6n .. 6n+5``, i.e.
    ``n = (((tick ^ elapsed) | 63).bit_length() - 1) // 6``, in slot ``(tick >> 6n) & 63``. Entries
    whose ``n`` is ``levels`` or more wait in an overflow heap; entries inserted with
    ``tick < elapsed`` (at or before ``now``) wait in a small *due* set and come out first.

    Invariants (checked by the property tests):

    * every entry in a level-``n`` slot has ``tick >> 6(n+1) == elapsed >> 6(n+1)`` and a slot
      index above ``elapsed``'s own (at or above, for level 0); hence the first tick of every
      occupied slot is ``>= elapsed`` and the entries of a lower level are all earlier than the
      entries of any higher level, and the overflow heap is later than the whole wheel;
    * level ``n`` has bit ``s`` of its occupancy bitmap set iff slot ``s`` is non-empty.

    So the earliest entry is in the first occupied slot of the lowest occupied level: found with
    ``(x & -x).bit_length()`` and, above level 0, one scan of that slot. :meth:`advance` never
    moves ``elapsed`` past the start of an occupied slot: it first cascades the slot (re-inserts
    its entries relative to the slot's start, which puts each in a lower level), so the
    invariants hold after every step.
    """

    __slots__ = (
        "_count",
        "_due",
        "_elapsed",
        "_levels",
        "_next",
        "_next_valid",
        "_nlevels",
        "_overflow",
        "_top_shift",
    )

    def __init__(self, now_tick: int = 0, levels: int = 6) -> None:
        if levels < 1:
            raise ValueError("a timing wheel needs at least one level")
        self._elapsed = now_tick + 1
        self._nlevels = levels
        self._top_shift = levels * SLOT_BITS
        self._levels: list[Level[T]] = [Level(number) for number in range(levels)]
        self._due: dict[WheelEntry[T], None] = {}
        self._overflow: OverflowHeap[T] = OverflowHeap()
        self._count = 0
        self._next: int | None = None
        self._next_valid = True

    @property
    def now(self) -> int:
        """The current tick: every item with ``tick <= now`` inserted before the last
        :meth:`advance` has been handed out."""
        return self._elapsed - 1

    @property
    def levels(self) -> int:
        """Number of 64-slot levels; ticks ``64**levels`` or more ahead go to the overflow heap."""
        return self._nlevels

    def __len__(self) -> int:
        return self._count

    def __repr__(self) -> str:
        return f"TimingWheel(now={self.now}, levels={self._nlevels}, len={self._count})"

    def insert(self, tick: int, seq: int, item: T) -> WheelEntry[T]:
        """Add ``item`` due at ``tick`` (ordered by ``seq`` among equal ticks). O(1).

        A ``tick <= now`` is due at once: it comes out at the next :meth:`advance`, before any
        later tick.
        """
        return self.insert_entry(WheelEntry(tick, seq, item))

    def insert_entry(self, entry: WheelEntry[T]) -> WheelEntry[T]:
        """Add an entry the caller built, with ``tick``, ``seq`` and ``item`` set. O(1).

        For callers that embed the entry in their own object (a subclass of
        :class:`WheelEntry` whose ``item`` is itself) to save an allocation per timer. The
        entry must not be held by any wheel (``entry.active`` is False).
        """
        self._place(entry)
        self._count += 1
        if self._next_valid:
            tick = entry.tick
            nxt = self._next
            if nxt is None or tick < nxt:
                self._next = tick
        return entry

    def _place(self, entry: WheelEntry[T]) -> None:
        tick = entry.tick
        elapsed = self._elapsed
        if tick < elapsed:
            entry.where = DUE
            self._due[entry] = None
            return
        number = (((tick ^ elapsed) | SLOT_MASK).bit_length() - 1) // SLOT_BITS
        if number >= self._nlevels:
            self._overflow.push(entry)
            return
        level = self._levels[number]
        slot = (tick >> level.shift) & SLOT_MASK
        entry.where = number
        entry.slot = slot
        level.slots[slot][entry] = None
        level.occupied |= 1 << slot

    def remove(self, entry: WheelEntry[T]) -> bool:
        """Take ``entry`` out. O(1). False if it was already removed or handed out.

        ``entry`` must have been returned by this wheel's :meth:`insert`.
        """
        where = entry.where
        if where >= 0:
            self._levels[where].discard(entry)
        elif where == DUE:
            del self._due[entry]
            entry.where = DETACHED
        elif where == OVERFLOW:
            self._overflow.discard(entry)
        else:
            return False
        self._count -= 1
        if self._next_valid and entry.tick == self._next:
            self._next_valid = False
        return True

    def advance(self, to_tick: int) -> list[T]:
        """Hand out every item with ``tick <= to_tick`` (and every due one), in (tick, seq) order.

        Sets ``now`` to ``max(now, to_tick)``. Each item comes out exactly once, never before its
        tick. Cost: O(items handed out + occupied slots passed + entries cascaded).
        """
        target = to_tick + 1
        if target < self._elapsed:
            target = self._elapsed
        out: list[T] = []
        if self._due:
            due = list(self._due)
            self._due.clear()
            due.sort(key=_by_tick_seq)
            for entry in due:
                entry.where = DETACHED
                out.append(entry.item)
        self._next_valid = False
        if self._count > len(out):
            self._run(target, out)
        self._elapsed = target
        self._count -= len(out)
        return out

    def _run(self, target: int, out: list[T]) -> None:
        """Empty every slot that starts before ``target`` into ``out``, cascading on the way.

        Each pass looks at the earliest occupied slot (lowest occupied level, lowest set bit):
        a level-0 slot is one tick and comes out sorted by seq; a higher slot whose whole range
        is before ``target`` comes out sorted by (tick, seq) directly (nothing earlier is left
        anywhere); otherwise, if it starts at or before ``target``, it is cascaded.
        """
        levels = self._levels
        while True:
            for level in levels:
                if level.occupied:
                    break
            else:
                # The wheel is empty: bring in the overflow's earliest top-level block.
                overflow = self._overflow
                first = overflow.min_tick()
                if first is None:
                    return
                top = self._top_shift
                start = (first >> top) << top
                if start > target:
                    return
                end = start + (1 << top)
                entries = overflow.pop_before(end)  # in (tick, seq) order
                if end <= target:
                    for entry in entries:
                        entry.where = DETACHED
                        out.append(entry.item)
                    self._elapsed = end
                else:
                    self._elapsed = start
                    for entry in entries:
                        self._place(entry)
                continue
            occupied = level.occupied
            slot = (occupied & -occupied).bit_length() - 1
            shift = level.shift
            if shift == 0:
                # Level 0: one tick per slot; stay here while it has slots before ``target``.
                base = self._elapsed & ~SLOT_MASK
                slots = level.slots
                while True:
                    tick = base | slot
                    if tick >= target:
                        level.occupied = occupied
                        self._next = tick  # exact: nothing is due, this is the earliest slot
                        self._next_valid = True
                        return
                    bucket = slots[slot]
                    slots[slot] = {}
                    occupied &= ~(1 << slot)
                    if len(bucket) == 1:
                        for entry in bucket:
                            entry.where = DETACHED
                            out.append(entry.item)
                    else:
                        for entry in sorted(bucket, key=_by_seq):
                            entry.where = DETACHED
                            out.append(entry.item)
                    if not occupied:
                        break
                    slot = (occupied & -occupied).bit_length() - 1
                level.occupied = occupied
                self._elapsed = tick + 1
                continue
            up = shift + SLOT_BITS
            start = ((self._elapsed >> up) << up) | (slot << shift)
            if start > target:
                return
            entries = level.take(slot)
            end = start + (1 << shift)
            if end <= target:
                entries.sort(key=_by_tick_seq)
                for entry in entries:
                    entry.where = DETACHED
                    out.append(entry.item)
                self._elapsed = end
                continue
            # Cascade: relative to ``start`` every entry of this slot lands in a lower level.
            self._elapsed = start
            for entry in entries:
                tick = entry.tick
                number = (((tick ^ start) | SLOT_MASK).bit_length() - 1) // SLOT_BITS
                lower = levels[number]
                index = (tick >> lower.shift) & SLOT_MASK
                entry.where = number
                entry.slot = index
                lower.slots[index][entry] = None
                lower.occupied |= 1 << index

    def next_tick(self) -> int | None:
        """The exact earliest tick of any item, or None when the wheel is empty."""
        if self._next_valid:
            return self._next
        result: int | None
        if self._due:
            result = min(entry.tick for entry in self._due)
        else:
            for level in self._levels:
                occupied = level.occupied
                if occupied:
                    slot = (occupied & -occupied).bit_length() - 1
                    if level.shift == 0:
                        result = (self._elapsed & ~SLOT_MASK) | slot
                    else:
                        result = level.min_tick(slot)
                    break
            else:
                result = self._overflow.min_tick()
        self._next = result
        self._next_valid = True
        return result

    def check_invariants(self) -> None:
        """Raise AssertionError if an internal invariant is broken (for tests; O(n))."""
        elapsed = self._elapsed
        count = len(self._due) + len(self._overflow)
        for entry in self._due:
            assert entry.where == DUE and entry.tick < elapsed, entry
        for number, level in enumerate(self._levels):
            up = level.shift + SLOT_BITS
            for slot, bucket in enumerate(level.slots):
                assert bool(bucket) == bool(level.occupied >> slot & 1), (number, slot)
                for entry in bucket:
                    count += 1
                    assert entry.where == number and entry.slot == slot, entry
                    assert entry.tick >= elapsed, (entry, elapsed)
                    assert entry.tick >> up == elapsed >> up, (entry, elapsed, number)
                    assert (entry.tick >> level.shift) & SLOT_MASK == slot, entry
                    if number:
                        assert (entry.tick >> level.shift) != (elapsed >> level.shift), entry
        top = self._top_shift
        for entry in self._overflow.live():
            assert entry.tick >> top > elapsed >> top, (entry, elapsed)
        assert count == self._count, (count, self._count)
