"""Staged cascades: a slot's cascade done ahead of time, a budget of entry moves at a time.

Cascading a level-``L`` slot at the moment the cursor reaches it costs one move per entry, all
in one :meth:`~.TimingWheel.advance`: a stall of tens of milliseconds for a slot of 80 000
entries. So for every level ``L >= 1`` the wheel *stages* the slot right after the cursor's
own at that level into ``L`` **staging levels**: ``Level`` objects laid out exactly as the live
levels ``0 .. L-1`` will be once the cursor is at the slot's start. When the cursor gets there
every live level below ``L`` is empty (everything before the slot has come out), so the staging
levels and the live levels swap roles: O(L), no entry moves.

Worked example: ``TimingWheel(now_tick=0, budget=512)`` (so ``elapsed = 1``) and 2 000 timers
at ticks ``8192 + 2*i`` for ``i`` in ``0 .. 1999``, i.e. ``8192 .. 12190``.

1. They all land in live level 2, slot 2 (``tick >> 12 == 2``). The cursor's own level-2 slot
   is 0; the slot after it, 1, is empty, so nothing can be staged yet (the inserts' share of
   staging finds nothing to do) and :meth:`~.TimingWheel.next_work_tick` says 4096: the start
   of slot 1, from which slot 2 is the one right after the cursor's.
2. ``advance(4096)``: nothing comes out; the cursor (``elapsed`` 4097) enters level-2 slot 1,
   which marks levels 1 and 2 pending. The budget at the end of the call finds level 1 with
   nothing to stage (its slot after the cursor's is empty) and, at level 2, targets slot 2:
   ``staged_key[2] = 2``. It moves 512 entries (the latest inserted first), each placed
   relative to the slot's start 8192: a tick in ``8192 .. 8255`` into staging level 0 (one
   tick per slot), any other into staging level 1 (slot ``(tick >> 6) & 63``). Three more
   budgets (``work()`` in idle time, or later advances) move 512, 512 and 464; the live slot
   is then empty but its occupancy bit stays set, since ``staged_count[2] == 2000``.
3. ``advance(8192)`` reaches slot 2's start: its staging is complete, so :meth:`Staging.cross`
   swaps staging levels 0 and 1 with the empty live levels 0 and 1 (``elapsed = 8192``) and
   the loop of ``advance`` goes on in level 0: tick 8192 comes out. Live level 0 held the 32
   timers of ``8192 .. 8254``, live level 1 holds 32 in each of slots 1 .. 61 and 16 in slot
   62 (``12160 .. 12190``); no entry moved.
4. The budget at the end of that call stages the next level-1 slot, ticks ``8256 .. 8319``
   (32 entries, within one budget). Level 2's next slot, 3, is empty: nothing to stage there.

Had ``work()`` not been called and no advance come between 4096 and 8192, step 3 would find
the staging unfinished and move the remaining entries then: an ``advance`` does at most its
budget of moves *unless* it crosses into a slot whose staging has not finished.

Guarantees: a staged entry's ``where`` names its staging level, so removal stays O(1); an
entry inserted into a slot being staged goes straight to its staging levels; an entry is still
moved at most ``levels - 1`` times over its life. Not guaranteed: that staging finishes before
the crossing (that needs enough calls; see the budget contract of ``TimingWheel``).
"""

from __future__ import annotations

from typing import Generic, TypeVar

from .entry import WheelEntry, hand_out
from .level import UNKNOWN, Level, spread
from .slots import SLOT_BITS, SLOT_MASK, lowest_slot, slot_start

T = TypeVar("T")


class Staging(Generic[T]):
    """The staged slot of every level ``L >= 1`` and its ``L`` staging levels.

    ``staging_levels[L]`` are level ``L``'s staging levels (numbers ``0 .. L-1``);
    ``staged_key[L]`` is the staged slot as ``tick >> 6L`` of its ticks, -1 for none (a key at
    or before the cursor's own slot is stale and gets retargeted); ``staged_count[L]`` is how
    many entries its staging levels hold.

    Which levels to look at is the wheel's to say: :meth:`work` takes a *pending* bitmask (bit
    ``L`` set: level ``L`` may have staging to do, since an entry went into it, its staged slot
    was emptied by removes, or the cursor entered a new slot of it) and returns what is left.

    The staging shares the wheel's list of live levels (``live``): a crossing swaps staging
    levels into it. ``moves`` counts the entries it moved from live slots to staging levels.
    """

    __slots__ = ("live", "moves", "staged_count", "staged_key", "staging_levels")

    def __init__(self, live: list[Level[T]]) -> None:
        self.live = live
        levels = len(live)
        self.staging_levels: list[list[Level[T]]] = [[]]
        ident = levels  # the live levels have idents 0 .. levels-1
        for number in range(1, levels):
            row: list[Level[T]] = [Level(lower, ident + lower, number) for lower in range(number)]
            self.staging_levels.append(row)
            ident += number
        self.staged_key = [-1] * levels
        self.staged_count = [0] * levels
        self.moves = 0

    def level_objects(self) -> list[Level[T]]:
        """Every staging level object, in ident order (they follow the live levels')."""
        return [level for row in self.staging_levels for level in row]

    def add(self, number: int, entry: WheelEntry[T]) -> None:
        """Put an entry of level ``number``'s staged slot straight into its staging levels."""
        key = self.staged_key[number]
        tick = entry.tick
        # spread() for one entry, inlined: inserts into a slot being staged are common.
        start = key << (number * SLOT_BITS)
        row = self.staging_levels[number]
        lower = row[(((tick ^ start) | SLOT_MASK).bit_length() - 1) // SLOT_BITS]
        index = (tick >> lower.shift) & SLOT_MASK
        bucket = lower.slots[index]
        entry.where = lower.ident
        entry.pos = len(bucket)
        bucket.append(entry)
        lower.occupied |= 1 << index
        if tick < lower.mins[index]:
            lower.mins[index] = tick
        self.staged_count[number] += 1
        # The live slot counts as occupied while it has staged entries.
        self.live[number].occupied |= 1 << (key & SLOT_MASK)

    def removed(self, number: int, level: Level[T], slot: int) -> int:
        """An entry was removed from ``slot`` of ``level``, a staging level of level ``number``.
        Returns the wheel's pending bit for ``number`` if that was its last staged entry
        (staging is free to pick another slot then), else 0."""
        if not level.slots[slot]:
            level.occupied &= ~(1 << slot)
        left = self.staged_count[number] - 1
        self.staged_count[number] = left
        if left:
            return 0
        self.emptied(number)
        return 1 << number

    def emptied(self, number: int) -> None:
        """The last staged entry of level ``number`` is gone (the caller keeps the count and
        marks the level pending: staging is free to pick another slot)."""
        # The live slot's bit now only says whether its bucket has entries.
        live = self.live[number]
        staged_slot = self.staged_key[number] & SLOT_MASK
        if not live.slots[staged_slot]:
            live.occupied &= ~(1 << staged_slot)

    def work(self, elapsed: int, budget: int, pending: int) -> int:
        """Stage up to ``budget`` entries of the ``pending`` levels, lowest first (its crossing
        comes first), with the cursor at ``elapsed``.

        Returns the levels still pending: non-zero only if the budget ran out (work may remain).
        """
        levels = self.live
        keys = self.staged_key
        counts = self.staged_count
        pending &= ~1  # level 0 has nothing to stage
        todo = pending
        while todo:
            low = todo & -todo  # the lowest pending level's bit
            todo ^= low
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
                    pending &= ~low
                    continue
                keys[number] = cursor + 1
            bucket = level.slots[slot]
            if bucket:
                budget -= self._move(number, level, bucket, budget)
                if bucket:
                    return pending
            pending &= ~low  # staged to the end: nothing more until a crossing
            if budget <= 0:
                return pending
        return pending

    def _move(self, number: int, level: Level[T], bucket: list[WheelEntry[T]], limit: int) -> int:
        """Move up to ``limit`` entries of the staged live ``bucket`` to the staging levels."""
        if limit >= len(bucket):
            entries = bucket[:]
            bucket.clear()
        else:  # from the end, so the entries left keep their ``pos`` (none if limit <= 0)
            cut = len(bucket) - max(limit, 0)
            entries = bucket[cut:]
            del bucket[cut:]
        key = self.staged_key[number]
        level.mins[key & SLOT_MASK] = UNKNOWN  # the slot's earliest may be among those moved
        spread(entries, self.staging_levels[number], key << level.shift)
        moved = len(entries)  # >= 1: the live slot's bit stays set (it has staged entries)
        self.staged_count[number] += moved
        self.moves += moved
        return moved

    def cross(
        self, number: int, level: Level[T], slot: int, end: int, target: int, out: list[T]
    ) -> int:
        """The cursor reaches the staged ``slot`` of level ``number``, which ends at ``end``.

        Every live level below is empty (the slot is the earliest occupied one) and the slot
        starts at or before ``target``. If the whole slot is due its entries come out, in
        ``(tick, seq)`` order, into ``out``; otherwise the rest of it is staged and the staging
        levels swap roles with the live levels below (levels ``1 .. number`` then have new slots
        to stage: the caller marks them pending). Returns the new cursor: ``end``, or the slot's
        start.
        """
        row = self.staging_levels[number]
        bucket = level.slots[slot]
        start = self.staged_key[number] << level.shift
        level.mins[slot] = UNKNOWN  # the live slot ends empty either way
        if end <= target:
            self.staged_count[number] = 0
            self.staged_key[number] = -1
            entries = list(bucket)
            bucket.clear()
            level.occupied &= ~(1 << slot)
            for lower in row:
                occupied = lower.occupied
                slots = lower.slots
                lower.mins = [UNKNOWN] * len(slots)  # every slot ends empty
                while occupied:
                    index = (occupied & -occupied).bit_length() - 1  # lowest_slot, inlined
                    occupied &= occupied - 1  # clear the lowest set bit
                    entries.extend(slots[index])
                    slots[index] = []
                lower.occupied = 0
            hand_out(entries, out)
            return end
        if bucket:
            # Staging did not finish in time (too few calls since it began): finish it now.
            self._move(number, level, bucket, len(bucket))
        self.staged_count[number] = 0
        self.staged_key[number] = -1
        level.occupied &= ~(1 << slot)
        levels = self.live
        for lower_number, staged in enumerate(row):
            live = levels[lower_number]
            levels[lower_number] = staged
            row[lower_number] = live
            staged.staging_for = 0
            live.staging_for = number
        return start

    def earliest(self, elapsed: int) -> int | None:
        """The exact earliest tick in the live levels (with their staged slots), the cursor at
        ``elapsed``; None if they are empty. The first occupied slot of the lowest occupied
        level holds it (the wheel's layout invariant)."""
        for level in self.live:
            occupied = level.occupied
            if occupied:
                # lowest_slot(occupied), inlined: the engine asks after every advance.
                slot = (occupied & -occupied).bit_length() - 1
                if level.shift == 0:
                    return (elapsed & ~SLOT_MASK) | slot  # one tick per slot
                return self.slot_min(level.shift // SLOT_BITS, level, slot)
        return None

    def slot_min(self, number: int, level: Level[T], slot: int) -> int:
        """The earliest tick of live ``slot`` of level ``number > 0``, with its staged part."""
        best = level.min_tick(slot) if level.slots[slot] else None
        key = self.staged_key[number]
        if self.staged_count[number] and key & SLOT_MASK == slot:
            for lower in self.staging_levels[number]:
                occupied = lower.occupied
                if occupied:
                    index = lowest_slot(occupied)
                    # staging level 0: one tick per slot, the staged slot's start + index
                    start = key << level.shift
                    tick = start | index if not lower.shift else lower.min_tick(index)
                    if best is None or tick < best:
                        best = tick
                    break
        assert best is not None
        return best

    def next_work_tick(self, elapsed: int) -> int | None:
        """The earliest tick at which the cursor makes a slot stageable that is not yet: the
        start of an empty slot right before an occupied one, at any level ``>= 1``; or None."""
        best: int | None = None
        for number in range(1, len(self.live)):
            level = self.live[number]
            occupied = level.occupied
            cursor_slot = (elapsed >> level.shift) & SLOT_MASK
            if not occupied or occupied >> (cursor_slot + 1) & 1:
                continue  # empty, or its next slot is occupied: stageable now
            tick = slot_start(elapsed, number, lowest_slot(occupied) - 1)
            if best is None or tick < best:
                best = tick
        return best
