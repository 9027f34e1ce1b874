"""The hierarchical hashed timing wheel: pure, synchronous, generic over the item type."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final, Generic, TypeVar

from .entry import DETACHED, DUE, OVERFLOW, ItemEntry, WheelEntry, by_seq, hand_out
from .level import UNKNOWN, Level, spread, unlink
from .overflow import OverflowHeap
from .slots import SLOT_BITS, SLOT_MASK
from .staging import Staging

T = TypeVar("T")

#: Entry moves of staging work that one :meth:`TimingWheel.advance` does beyond handing out.
DEFAULT_BUDGET: Final = 512
#: Every ``INSERT_PERIOD``-th insert does up to ``INSERT_WORK`` moves of staging work (2 per
#: insert, amortized): a burst of inserts followed by a quiet spell stages its own slots.
INSERT_PERIOD: Final = 64
#: The staging moves of that one insert in ``INSERT_PERIOD`` (see above).
INSERT_WORK: Final = 128


class TimingWheel(Generic[T]):
    """Items keyed by an integer tick, handed out in ``(tick, seq)`` order by :meth:`advance`.

    Layout. The wheel keeps a cursor ``elapsed = now + 1``: the first tick not yet handed out.
    An entry with ``tick >= elapsed`` lives in level ``level_for(elapsed, tick)`` (the highest
    bit in which ``tick`` and ``elapsed`` differ, divided by 6), slot ``slot_for(tick, level)``
    (see :mod:`.slots`). Entries whose level is ``levels`` or more wait in an overflow heap;
    entries inserted with ``tick < elapsed`` (at or before ``now``) wait in a small *due* set
    and come out first.

    Worked example (``now = 0``, so ``elapsed = 1``): tick 5 goes to level 0 slot 5; tick 100
    (``100 ^ 1`` has bit 6 as its highest) to level 1 slot ``100 >> 6 = 1``; tick 5000 to
    level 2 slot 1. ``next_tick()`` is the lowest set bit of level 0's bitmap: 5.
    ``advance(100)`` (``target = 101``) hands out tick 5, then meets level 1 slot 1, which
    spans ``[64, 128)``: it starts before ``target`` but does not end before it, so it is
    *cascaded*: ``elapsed = 64``, and relative to 64 tick 100 is level 0 slot 36; it comes
    out, and the loop stops at level 2 slot 1 (``start = 4096 > target``). ``now`` is 100.

    Invariants (checked by :func:`.invariants.check_invariants` in the tests): every entry in a
    live level-``n`` slot agrees with ``elapsed`` above level ``n`` and has a slot index above
    ``elapsed``'s own there (at or above, for level 0). Hence the entries of a lower level are
    all earlier than those of any higher level, the overflow heap is later than the whole
    wheel, and the earliest entry is in the first occupied slot of the lowest occupied level.
    :meth:`advance` never moves ``elapsed`` past the start of an occupied slot without first
    cascading it.

    Staged cascades (:mod:`.staging`). A big slot's cascade is done ahead of time, a budget of
    moves per call, into staging levels that swap in when the cursor gets there; a staged
    slot's occupancy bit stays set while it has staged entries.

    Work contract. :meth:`remove` is O(1); :meth:`insert` and :meth:`insert_entry` are O(1)
    plus, every 64th call, up to 128 moves of staging (so a burst of inserts stages the slots
    it filled). One :meth:`advance` does O(items handed out + occupied slots passed +
    ``budget``) work, ``budget`` (default 512 entry moves) being the staging done at its end,
    *unless* it crosses into a slot whose staging is not finished: then it finishes that slot
    first. Staging needs calls: an engine with idle time should call :meth:`work` until it
    returns False, and advance by :meth:`next_work_tick` (a slot is staged only once the cursor
    is in the slot before it, so a jump over an empty slot finds the next one unstaged). The
    overflow heap (``64**levels`` ticks ahead: 795 days with 6 levels of ms) is not staged.
    Every entry is moved at most ``levels - 1`` times over its life; ``moves`` counts them.
    """

    __slots__ = (
        "_budget",
        "_by_ident",
        "_cascaded",
        "_count",
        "_due",
        "_elapsed",
        "_inserts_before_work",
        "_levels",
        "_next",
        "_next_valid",
        "_nlevels",
        "_overflow",
        "_pending",
        "_staged_count",
        "_staged_key",
        "_staging",
        "_top_shift",
        "work_moves",
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
        #: Bumped when an insert occupies an empty slot above level 0, which may move
        #: :meth:`next_work_tick` earlier: a caller armed for the old one compares it.
        self.work_moves = 0
        self._staging: Staging[T] = Staging(self._levels)
        # The staging's own lists, read on every insert and remove (one attribute load less).
        self._staged_key = self._staging.staged_key
        self._staged_count = self._staging.staged_count
        # Every Level object by ident (an entry's ``where``): live ones, then staging ones.
        self._by_ident: list[Level[T]] = [*self._levels, *self._staging.level_objects()]
        # Bit L set: level L may have staging to do (see Staging.work); set by inserts, removes
        # and cursor moves, cleared by staging.
        self._pending = 0
        self._inserts_before_work = INSERT_PERIOD
        self._budget = budget
        self._cascaded = 0  # entry moves by cascades of unstaged slots (the staging counts its own)
        self._due: dict[WheelEntry[T], None] = {}
        self._overflow: OverflowHeap[T] = OverflowHeap()
        self._count = 0
        # The earliest tick, while ``_next_valid``; a stale cache is recomputed by next_tick().
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

    @property
    def moves(self) -> int:
        """Entry moves between slots so far (staging and cascades), for tests and benchmarks."""
        return self._cascaded + self._staging.moves

    def __len__(self) -> int:
        return self._count

    def __repr__(self) -> str:
        return f"TimingWheel(now={self.now}, levels={self._nlevels}, len={self._count})"

    def insert(self, tick: int, seq: int, item: T) -> WheelEntry[T]:
        """Add ``item`` due at ``tick`` (ordered by ``seq`` among equal ticks). O(1).

        A ``tick <= now`` is due at once: it comes out at the next :meth:`advance`, before any
        later tick.
        """
        return self.insert_entry(ItemEntry(tick, seq, item))

    def insert_entry(self, entry: WheelEntry[T]) -> WheelEntry[T]:
        """Add an entry the caller built, with ``tick``, ``seq`` and ``item`` set. O(1). For
        callers that embed the entry in their own object (a :class:`WheelEntry` subclass whose
        ``item`` is itself). The entry must not be held by any wheel (``entry.active`` False).
        """
        self._place(entry)
        self._count += 1
        countdown = self._inserts_before_work - 1
        if countdown:
            self._inserts_before_work = countdown
        else:
            self._inserts_before_work = INSERT_PERIOD
            if self._pending:
                self._pending = self._staging.work(self._elapsed, INSERT_WORK, self._pending)
        if self._next_valid:
            tick = entry.tick
            nxt = self._next
            if nxt is None or tick < nxt:
                self._next = tick
        return entry

    def insert_entries(self, entries: Iterable[WheelEntry[T]]) -> None:
        """:meth:`insert_entry` for each of ``entries``, in one call (``schedule_many``'s batch,
        whose ticks are set)."""
        for entry in entries:
            self.insert_entry(entry)

    def _place(self, entry: WheelEntry[T]) -> None:
        tick = entry.tick
        elapsed = self._elapsed
        if tick < elapsed:
            entry.where = DUE
            self._due[entry] = None
            return
        # level_for(elapsed, tick), inlined: this runs on every insert.
        number = (((tick ^ elapsed) | SLOT_MASK).bit_length() - 1) // SLOT_BITS
        if number >= self._nlevels:
            self._overflow.push(entry)
            return
        level = self._levels[number]
        key = tick >> level.shift
        if key == self._staged_key[number]:
            self._staging.add(number, entry)
            return
        slot = key & SLOT_MASK  # slot_for(tick, number)
        bucket = level.slots[slot]
        if number and not bucket:
            self.work_moves += 1
        entry.where = level.ident
        entry.pos = len(bucket)
        bucket.append(entry)
        level.occupied |= 1 << slot
        self._pending |= 1 << number
        if tick < level.mins[slot]:  # a known earliest stays exact (UNKNOWN stays so)
            level.mins[slot] = tick

    def remove(self, entry: WheelEntry[T]) -> bool:
        """Take ``entry`` out. O(1). False if it was already removed or handed out.

        ``entry`` must have been returned by this wheel's :meth:`insert`.
        """
        where = entry.where
        if where >= 0:
            level = self._by_ident[where]
            slot = (entry.tick >> level.shift) & SLOT_MASK  # where _place filed it
            bucket = level.slots[slot]
            unlink(bucket, entry)
            entry.where = DETACHED
            if entry.tick == level.mins[slot]:
                level.mins[slot] = UNKNOWN  # forget the slot's earliest; rescanned if asked
            number = level.staging_for
            if number:  # a staging level of level ``number``
                self._pending |= self._staging.removed(number, level, slot)
            elif not bucket:
                # A staged slot's bit stays set while it has staged entries.
                number = level.shift // SLOT_BITS
                staged = self._staged_count[number]
                if not (staged and self._staged_key[number] & SLOT_MASK == slot):
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
            # level_for(elapsed, target), inlined (no ``| SLOT_MASK``: the XOR has higher bits)
            top = min(((elapsed ^ target).bit_length() - 1) // SLOT_BITS, self._nlevels - 1)
            self._pending |= (2 << top) - 2  # levels 1 .. top
        out: list[T] = []
        if self._due:
            due = list(self._due)
            self._due.clear()
            hand_out(due, out)
        self._next_valid = False
        if self._count > len(out):
            self._run(target, out)
        self._elapsed = target
        self._count -= len(out)
        if self._pending:
            self._pending = self._staging.work(target, self._budget, self._pending)
        return out

    def work(self, budget: int | None = None) -> bool:
        """Do up to ``budget`` (default: the wheel's) entry moves of staging work now.

        True if staging work may remain (call again when idle), False when there is none.
        Never hands anything out and never changes ``now``; :meth:`advance` does the same
        at its end with the wheel's budget.
        """
        limit = self._budget if budget is None else budget
        self._pending = self._staging.work(self._elapsed, limit, self._pending)
        return bool(self._pending)

    def next_work_tick(self) -> int | None:
        """The earliest tick at which advancing lets the wheel stage a slot it cannot stage yet,
        or None. O(levels).

        A slot is staged once the cursor is in the slot before it; when that slot is empty,
        an engine sleeping until :meth:`next_tick` would jump straight into the occupied one and
        find it unstaged. Arming for ``min(next_tick(), next_work_tick())`` and calling
        :meth:`advance` (then :meth:`work` while idle) at that tick avoids it.
        """
        return self._staging.next_work_tick(self._elapsed)

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
        staging = self._staging
        keys = staging.staged_key
        counts = staging.staged_count
        while True:
            for level in levels:
                if level.occupied:
                    break
            else:
                # The wheel is empty: bring in the overflow's earliest top-level block.
                block = self._overflow.take_block(self._top_shift, target)
                if block is None:
                    return
                start, end, entries = block
                if end <= target:
                    for entry in entries:
                        entry.where = DETACHED
                        out.append(entry.item)
                    self._elapsed = end
                else:
                    self._elapsed = start
                    for entry in entries:
                        self._place(entry)
                    self._cascaded += len(entries)
                continue
            occupied = level.occupied
            slot = (occupied & -occupied).bit_length() - 1  # lowest_slot(occupied), inlined
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
                    slots[slot] = []
                    occupied &= ~(1 << slot)
                    if len(bucket) == 1:
                        for entry in bucket:
                            entry.where = DETACHED
                            out.append(entry.item)
                    else:
                        for entry in sorted(bucket, key=by_seq):
                            entry.where = DETACHED
                            out.append(entry.item)
                    if not occupied:
                        break
                    slot = (occupied & -occupied).bit_length() - 1
                level.occupied = occupied
                self._elapsed = tick + 1
                continue
            up = shift + SLOT_BITS
            start = ((self._elapsed >> up) << up) | (slot << shift)  # slot_start, inlined
            if start > target:
                return
            end = start + (1 << shift)
            number = shift // SLOT_BITS
            if counts[number] and keys[number] == start >> shift:
                self._elapsed = staging.cross(number, level, slot, end, target, out)
                if end > target:  # swapped in, not handed out: levels 1 .. number have new slots
                    self._pending |= (1 << (number + 1)) - 2
                continue
            entries = level.take(slot)
            if end <= target:
                hand_out(entries, out)
                self._elapsed = end
                continue
            # Cascade: relative to ``start`` every entry of this slot lands in a lower level.
            self._elapsed = start
            spread(entries, levels, start)
            self._cascaded += len(entries)
            self._pending |= (1 << number) - 2  # levels 1 .. number-1 have new slots to stage

    def next_tick(self) -> int | None:
        """The exact earliest tick of any item, or None when the wheel is empty."""
        if self._next_valid:
            return self._next
        result: int | None
        if self._due:
            result = min(entry.tick for entry in self._due)
        else:
            result = self._staging.earliest(self._elapsed)
            if result is None:
                result = self._overflow.min_tick()
        self._next = result
        self._next_valid = True
        return result
