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

#: Entry moves of staging work that one :meth:`TimingWheel.advance` does beyond handing out.
DEFAULT_BUDGET = 512
#: Every ``INSERT_PERIOD``-th insert does up to ``INSERT_WORK`` moves of staging work (2 per
#: insert, amortized): a burst of inserts followed by a quiet spell stages its own slots.
INSERT_PERIOD = 64
INSERT_WORK = 128


class TimingWheel(Generic[T]):
    """Items keyed by an integer tick, handed out in ``(tick, seq)`` order by :meth:`advance`.

    Layout. Internally the wheel keeps a cursor ``elapsed = now + 1``: the first tick not yet
    handed out. An entry with ``tick >= elapsed`` lives in level ``n`` when the highest bit in
    which ``tick`` and ``elapsed`` differ is in bits ``6n .. 6n+5``, i.e.
    ``n = (((tick ^ elapsed) | 63).bit_length() - 1) // 6``, in slot ``(tick >> 6n) & 63``. Entries
    whose ``n`` is ``levels`` or more wait in an overflow heap; entries inserted with
    ``tick < elapsed`` (at or before ``now``) wait in a small *due* set and come out first.

    Staged cascades. When the cursor reaches the start of an occupied slot of level ``L > 0``
    the slot's entries must be spread over levels ``0 .. L-1``; done at once that is one move
    per entry, a stall of tens of milliseconds for a big slot. Instead, for every level ``L``
    the wheel *stages* the slot right after the cursor's own at that level, ahead of time: its
    entries are moved, a bounded number per call, into ``L`` staging levels that hold them
    exactly where they will be once the cursor is at the slot's start. When the cursor gets
    there the live levels ``0 .. L-1`` are empty (everything before the slot has come out), so
    the staging levels and the live levels swap roles: O(L), no entry moves. An entry inserted
    into a slot being staged goes straight to the staging levels; a staged entry's ``where``
    names its staging level, so :meth:`remove` stays O(1). Invariants (checked by the tests):

    * every entry in a live level-``n`` slot has ``tick >> 6(n+1) == elapsed >> 6(n+1)`` and a
      slot index above ``elapsed``'s own (at or above, for level 0); hence the first tick of
      every occupied slot is ``>= elapsed`` and the entries of a lower level are all earlier
      than the entries of any higher level, and the overflow heap is later than the whole wheel;
    * a staged entry of level ``L`` belongs to the staged slot ``key`` of level ``L``
      (``tick >> 6L == key``, the slot right after ``elapsed``'s own, in the same block)
      and sits where it would sit if ``elapsed`` were the slot's start ``key << 6L``;
    * bit ``s`` of a level's occupancy bitmap is set iff slot ``s`` is non-empty or, for a live
      level, is the staged slot and has staged entries.

    So the earliest entry is in the first occupied slot of the lowest occupied live level.
    :meth:`advance` never moves ``elapsed`` past the start of an occupied slot without first
    cascading it (swapping in its staging levels).

    Work contract. :meth:`remove` is O(1); :meth:`insert` and :meth:`insert_entry` are O(1)
    with a bounded, amortized share of staging (every 64th does up to 128 moves), so a burst of
    inserts followed by a quiet spell has staged the slots it filled. One :meth:`advance` does
    O(items handed out + occupied slots passed + ``budget``) work, where ``budget`` (default
    512 entry moves) is the staging done at its end, *unless* it crosses into a slot whose
    staging is not finished: then it finishes it first (the rest of that slot). Staging needs
    calls: an engine that advances once per due tick gives plenty when timers are dense, but a
    quiet wheel woken only when a big slot is reached, with no inserts since it filled, would
    stage it all in that one call. An engine with idle time should call :meth:`work` (more
    staging, up to a budget; True while more may be pending) until it returns False. Staging of
    a slot starts once the cursor is in the slot before it (at that level): a cursor that jumps
    over an empty slot straight into the next one in a single call finds that one unstaged;
    :meth:`next_work_tick` says when to advance to avoid that. The
    overflow heap (``64**levels`` ticks ahead and more: 795 days with 6 levels of ms) is not
    staged: its next top-level block comes in at once when the wheel is otherwise empty. Every
    entry is still moved at most ``levels - 1`` times over its life. ``moves`` counts entry
    moves (staging and cascades), for tests and benchmarks.
    """

    __slots__ = (
        "_all",
        "_budget",
        "_count",
        "_credit",
        "_dirty",
        "_due",
        "_elapsed",
        "_levels",
        "_next",
        "_next_valid",
        "_nlevels",
        "_overflow",
        "_shadow",
        "_stage_count",
        "_stage_key",
        "_top_shift",
        "moves",
    )

    def __init__(self, now_tick: int = 0, levels: int = 6, budget: int = DEFAULT_BUDGET) -> None:
        if levels < 1:
            raise ValueError("a timing wheel needs at least one level")
        if budget < 1:
            raise ValueError("the staging budget must be positive")
        self._elapsed = now_tick + 1
        self._nlevels = levels
        self._top_shift = levels * SLOT_BITS
        self._levels: list[Level[T]] = [Level(number) for number in range(levels)]
        # Every Level object by ident (an entry's ``where``): the live levels, then for each
        # level L >= 1 its L staging levels ``_shadow[L][0 .. L-1]``.
        self._all: list[Level[T]] = list(self._levels)
        self._shadow: list[list[Level[T]]] = [[]]
        for owner in range(1, levels):
            row: list[Level[T]] = []
            for number in range(owner):
                level: Level[T] = Level(number, len(self._all), owner)
                self._all.append(level)
                row.append(level)
            self._shadow.append(row)
        # Per level L: the staged slot (``tick >> 6L`` of its ticks; -1 for none) and how many
        # entries its staging levels hold. A key at or before the cursor's own slot is stale.
        self._stage_key = [-1] * levels
        self._stage_count = [0] * levels
        # Bit L set: level L may have staging work to do.
        self._dirty = 0
        self._credit = INSERT_PERIOD
        self._budget = budget
        self.moves = 0
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
        credit = self._credit - 1
        if credit:
            self._credit = credit
        else:
            self._credit = INSERT_PERIOD
            if self._dirty:
                self._work(INSERT_WORK)
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
        key = tick >> level.shift
        if key == self._stage_key[number]:
            self._stage_in(number, entry)
            return
        slot = key & SLOT_MASK
        entry.where = level.ident
        entry.slot = slot
        level.slots[slot][entry] = None
        level.occupied |= 1 << slot
        self._dirty |= 1 << number

    def _stage_in(self, owner: int, entry: WheelEntry[T]) -> None:
        """Put an entry of level ``owner``'s staged slot into that slot's staging levels."""
        tick = entry.tick
        start = self._stage_key[owner] << (owner * SLOT_BITS)
        lower = self._shadow[owner][(((tick ^ start) | SLOT_MASK).bit_length() - 1) // SLOT_BITS]
        index = (tick >> lower.shift) & SLOT_MASK
        entry.where = lower.ident
        entry.slot = index
        lower.slots[index][entry] = None
        lower.occupied |= 1 << index
        self._stage_count[owner] += 1
        self._levels[owner].occupied |= 1 << (self._stage_key[owner] & SLOT_MASK)

    def remove(self, entry: WheelEntry[T]) -> bool:
        """Take ``entry`` out. O(1). False if it was already removed or handed out.

        ``entry`` must have been returned by this wheel's :meth:`insert`.
        """
        where = entry.where
        if where >= 0:
            level = self._all[where]
            slot = entry.slot
            bucket = level.slots[slot]
            del bucket[entry]
            entry.where = DETACHED
            owner = level.owner
            if owner:
                if not bucket:
                    level.occupied &= ~(1 << slot)
                left = self._stage_count[owner] - 1
                self._stage_count[owner] = left
                if not left:
                    # Nothing staged any more: the live slot's bit now only says whether its
                    # bucket has entries, and staging is free to pick another slot.
                    live = self._levels[owner]
                    staged_slot = self._stage_key[owner] & SLOT_MASK
                    if not live.slots[staged_slot]:
                        live.occupied &= ~(1 << staged_slot)
                    self._dirty |= 1 << owner
            elif not bucket:
                number = level.shift // SLOT_BITS
                # A staged slot's bit stays set while it has staged entries.
                if not (self._stage_count[number] and self._stage_key[number] & SLOT_MASK == slot):
                    level.occupied &= ~(1 << slot)
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
        tick. Cost: O(items handed out + occupied slots passed + budget), plus the unfinished
        staging of a slot it crosses into (see the class docstring).
        """
        target = to_tick + 1
        elapsed = self._elapsed
        if target < elapsed:
            target = elapsed
        elif (elapsed ^ target) >> SLOT_BITS:
            # The cursor moves into another level-1 (or higher) slot: the slot after it, at
            # each level whose cursor slot changes, may now be staged.
            top = min(((elapsed ^ target).bit_length() - 1) // SLOT_BITS, self._nlevels - 1)
            self._dirty |= (2 << top) - 2
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
        if self._dirty:
            self._work(self._budget)
        return out

    def work(self, budget: int | None = None) -> bool:
        """Do up to ``budget`` (default: the wheel's) entry moves of staging work now.

        True if staging work may remain (call again when idle), False when there is none.
        Never hands anything out and never changes ``now``; :meth:`advance` does the same
        at its end with the wheel's budget.
        """
        left = self._work(self._budget if budget is None else budget)
        return left <= 0 and bool(self._dirty & ~1)

    def next_work_tick(self) -> int | None:
        """The earliest tick at which advancing lets the wheel stage a slot it cannot stage yet,
        or None. O(levels).

        A slot is staged once the cursor is in the slot before it; when that slot is empty,
        an engine sleeping until :meth:`next_tick` would jump straight into the occupied one and
        find it unstaged. Arming for ``min(next_tick(), next_work_tick())`` and calling
        :meth:`advance` (then :meth:`work` while idle) at that tick avoids it.
        """
        elapsed = self._elapsed
        best: int | None = None
        for level in self._levels[1:]:
            shift = level.shift
            cursor = elapsed >> shift
            occupied = level.occupied
            if not occupied or occupied >> ((cursor & SLOT_MASK) + 1) & 1:
                continue  # empty, or its next slot is occupied: stageable now
            first = (occupied & -occupied).bit_length() - 1
            tick = (((cursor >> SLOT_BITS) << SLOT_BITS) | (first - 1)) << shift
            if best is None or tick < best:
                best = tick
        return best

    def _work(self, budget: int) -> int:
        """Stage up to ``budget`` entries, lowest level first (its crossing comes first).

        Returns the budget left; 0 means it ran out (work may remain).
        """
        levels = self._levels
        keys = self._stage_key
        counts = self._stage_count
        elapsed = self._elapsed
        dirty = self._dirty & ~1
        self._dirty = dirty
        while dirty:
            low = dirty & -dirty
            dirty ^= low
            number = low.bit_length() - 1
            level = levels[number]
            if counts[number]:
                slot = keys[number] & SLOT_MASK
            else:
                # Nothing staged yet: (re)target the slot right after the cursor's own at this
                # level (no slot of the level can come before it). None if the cursor is in
                # the block's last slot: the next block is the level above's to stage.
                cursor = elapsed >> level.shift
                slot = (cursor & SLOT_MASK) + 1
                if slot > SLOT_MASK or not level.occupied >> slot & 1:
                    keys[number] = -1
                    self._dirty &= ~low
                    continue
                keys[number] = cursor + 1
            bucket = level.slots[slot]
            if bucket:
                budget -= self._stage_move(number, level, slot, bucket, budget)
                if bucket:
                    return 0
            self._dirty &= ~low  # staged to the end: nothing more until a crossing
            if budget <= 0:
                return 0
        return budget

    def _stage_move(
        self,
        owner: int,
        level: Level[T],
        slot: int,
        bucket: dict[WheelEntry[T], None],
        limit: int,
    ) -> int:
        """Move up to ``limit`` entries of the staged live ``bucket`` to the staging levels."""
        start = self._stage_key[owner] << level.shift
        shadow = self._shadow[owner]
        if limit >= len(bucket):
            entries = list(bucket)
            bucket.clear()
        else:
            popitem = bucket.popitem
            entries = [popitem()[0] for _ in range(limit)]
        for entry in entries:
            tick = entry.tick
            lower = shadow[(((tick ^ start) | SLOT_MASK).bit_length() - 1) // SLOT_BITS]
            index = (tick >> lower.shift) & SLOT_MASK
            entry.where = lower.ident
            entry.slot = index
            lower.slots[index][entry] = None
            lower.occupied |= 1 << index
        moved = len(entries)  # >= 1: the live slot's bit stays set (it has staged entries)
        self._stage_count[owner] += moved
        self.moves += moved
        return moved

    def _run(self, target: int, out: list[T]) -> None:
        """Empty every slot that starts before ``target`` into ``out``, cascading on the way.

        Each pass looks at the earliest occupied slot (lowest occupied level, lowest set bit; a
        staged slot with staged entries has its bit set): a level-0 slot is one tick and
        comes out sorted by seq; a higher slot whose whole range is before ``target`` comes out
        sorted by (tick, seq) directly (nothing earlier is left anywhere); otherwise, if it
        starts at or before ``target``, it is cascaded: its staging levels become the live
        lower levels, or, if it was not staged, its entries are placed again.
        """
        levels = self._levels
        keys = self._stage_key
        counts = self._stage_count
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
                    self.moves += len(entries)
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
            end = start + (1 << shift)
            number = shift // SLOT_BITS
            if counts[number] and keys[number] == start >> shift:
                self._cross_staged(number, level, slot, start, end, target, out)
                continue
            entries = level.take(slot)
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
                lower = levels[(((tick ^ start) | SLOT_MASK).bit_length() - 1) // SLOT_BITS]
                index = (tick >> lower.shift) & SLOT_MASK
                entry.where = lower.ident
                entry.slot = index
                lower.slots[index][entry] = None
                lower.occupied |= 1 << index
            self.moves += len(entries)
            self._dirty |= (1 << number) - 2  # levels 1 .. number-1 have new slots to stage

    def _cross_staged(
        self,
        number: int,
        level: Level[T],
        slot: int,
        start: int,
        end: int,
        target: int,
        out: list[T],
    ) -> None:
        """The cursor reaches the staged slot ``slot`` of level ``number`` (``start <= target``).

        Every live level below is empty (the slot is the earliest occupied one). If the whole
        slot is due its entries come out; otherwise the rest of it is staged and the staging
        levels swap roles with the (empty) live levels below.
        """
        shadow = self._shadow[number]
        bucket = level.slots[slot]
        self._stage_count[number] = 0
        self._stage_key[number] = -1
        if end <= target:
            entries = list(bucket)
            bucket.clear()
            level.occupied &= ~(1 << slot)
            for lower in shadow:
                occupied = lower.occupied
                slots = lower.slots
                while occupied:
                    index = (occupied & -occupied).bit_length() - 1
                    occupied &= occupied - 1
                    entries.extend(slots[index])
                    slots[index] = {}
                lower.occupied = 0
            entries.sort(key=_by_tick_seq)
            for entry in entries:
                entry.where = DETACHED
                out.append(entry.item)
            self._elapsed = end
            return
        if bucket:
            # Staging did not finish in time (too few calls since it began): finish it now.
            self._stage_key[number] = start >> level.shift
            self._stage_move(number, level, slot, bucket, len(bucket))
            self._stage_count[number] = 0
            self._stage_key[number] = -1
        level.occupied &= ~(1 << slot)
        levels = self._levels
        for lower_number, staged in enumerate(shadow):
            live = levels[lower_number]
            levels[lower_number] = staged
            shadow[lower_number] = live
            staged.owner = 0
            live.owner = number
        self._elapsed = start
        self._dirty |= (1 << (number + 1)) - 2  # levels 1 .. number: new slots to stage

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
                        result = self._slot_min(level.shift // SLOT_BITS, level, slot)
                    break
            else:
                result = self._overflow.min_tick()
        self._next = result
        self._next_valid = True
        return result

    def _slot_min(self, number: int, level: Level[T], slot: int) -> int:
        """The earliest tick of live slot ``slot`` of level ``number`` > 0 with its staged part."""
        best = level.min_tick(slot) if level.slots[slot] else None
        key = self._stage_key[number]
        if self._stage_count[number] and key & SLOT_MASK == slot:
            for lower in self._shadow[number]:
                occupied = lower.occupied
                if occupied:
                    index = (occupied & -occupied).bit_length() - 1
                    # staging level 0: one tick per slot, the staged slot's start + index
                    start = key << level.shift
                    tick = start | index if not lower.shift else lower.min_tick(index)
                    if best is None or tick < best:
                        best = tick
                    break
        assert best is not None
        return best

    def check_invariants(self) -> None:
        """Raise AssertionError if an internal invariant is broken (for tests; O(n))."""
        elapsed = self._elapsed
        count = len(self._due) + len(self._overflow)
        for entry in self._due:
            assert entry.where == DUE and entry.tick < elapsed, entry
        assert [level.ident for level in self._all] == list(range(len(self._all)))
        for number, level in enumerate(self._levels):
            assert level.owner == 0 and level.shift == number * SLOT_BITS, number
            up = level.shift + SLOT_BITS
            staged_slot = self._stage_key[number] & SLOT_MASK if self._stage_count[number] else -1
            for slot, bucket in enumerate(level.slots):
                occupied = bool(bucket) or slot == staged_slot
                assert occupied == bool(level.occupied >> slot & 1), (number, slot)
                for entry in bucket:
                    count += 1
                    assert entry.where == level.ident and entry.slot == slot, entry
                    assert entry.tick >= elapsed, (entry, elapsed)
                    assert entry.tick >> up == elapsed >> up, (entry, elapsed, number)
                    assert (entry.tick >> level.shift) & SLOT_MASK == slot, entry
                    if number:
                        assert (entry.tick >> level.shift) != (elapsed >> level.shift), entry
        for owner in range(1, self._nlevels):
            key = self._stage_key[owner]
            shift = owner * SLOT_BITS
            staged = 0
            for number, lower in enumerate(self._shadow[owner]):
                assert lower.owner == owner and lower.shift == number * SLOT_BITS, owner
                for slot, bucket in enumerate(lower.slots):
                    assert bool(bucket) == bool(lower.occupied >> slot & 1), (owner, slot)
                    for entry in bucket:
                        staged += 1
                        tick = entry.tick
                        assert entry.where == lower.ident and entry.slot == slot, entry
                        assert tick >> shift == key, (entry, owner, key)
                        start = key << shift
                        place = (((tick ^ start) | SLOT_MASK).bit_length() - 1) // SLOT_BITS
                        assert place == number, (entry, owner, number)
                        assert (tick >> lower.shift) & SLOT_MASK == slot, entry
            assert staged == self._stage_count[owner], (owner, staged)
            if staged:
                # the staged slot is the one right after the cursor's own, in the same block
                assert key == (elapsed >> shift) + 1, (owner, key, elapsed)
                assert key >> SLOT_BITS == elapsed >> (shift + SLOT_BITS), (owner, key, elapsed)
            count += staged
        top = self._top_shift
        for entry in self._overflow.live():
            assert entry.tick >> top > elapsed >> top, (entry, elapsed)
        assert count == self._count, (count, self._count)
