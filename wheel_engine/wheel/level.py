"""One level of the hierarchical wheel: 64 slots and an occupancy bitmap."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final, Generic, TypeVar

from .entry import WheelEntry
from .slots import SLOT_BITS, SLOT_MASK, SLOTS

T = TypeVar("T")

#: A slot's entry in ``Level.mins`` when its earliest tick is not known (below every real tick,
#: so the insert's ``tick < mins[slot]`` leaves it alone; fits a native 63-bit int).
UNKNOWN: Final = -(1 << 62)


class Level(Generic[T]):
    """Slots of one level, each a ``list`` of entries in no particular order.

    Level ``n`` holds entries whose tick first differs from the wheel's cursor in bits
    ``6n .. 6n+5``; the slot index is those six bits (:func:`~.slots.slot_for`). Slot ``s`` is
    non-empty exactly when bit ``s`` of :attr:`occupied` is set, so the first non-empty slot is
    found with bit arithmetic instead of a scan (:func:`~.slots.lowest_slot`). A list gives O(1)
    insert (append) and O(1) removal (:func:`unlink`: the last entry takes the removed one's
    place, found by its ``pos``), and costs a fraction of a dict used as a set (one pointer per
    entry, no hash table); the order within a slot is lost, which nothing needs (a slot comes out
    sorted by ``(tick, seq)``).

    ``ident`` is this object's index in the wheel's table of level objects: an entry's ``where``
    holds it, so :meth:`TimingWheel.remove` finds the slot in O(1) whatever role the object has.
    ``staging_for`` is 0 while this object is a live level of the wheel, or ``L`` while it is one
    of the staging levels of level ``L``'s staged slot (see :mod:`.staging`); a staging level
    and the live level it will replace have the same ``shift``, so the two can swap roles.

    ``mins[s]`` is slot ``s``'s earliest tick, or :data:`UNKNOWN`. The engine asks for the
    earliest tick after nearly every advance, and when the lowest occupied level is a high one
    its first slot can hold a large share of all timers: a scan each time cost O(slot size) per
    round. So the scan's result is kept (:meth:`min_tick`) and kept exact by inserts (``tick <
    mins[s]``); removing the entry at the minimum, or taking entries out in bulk, forgets it
    (back to UNKNOWN, rescanned at the next ask: one scan per removal of a slot's minimum).
    Guaranteed: a known value is exactly the slot's earliest tick (so an empty slot is
    UNKNOWN). Staging levels keep theirs the same way (:func:`spread` keeps it too), so a swap
    of roles keeps the guarantee. Level 0 never knows one (a level-0 slot is one tick).
    """

    __slots__ = ("ident", "mins", "occupied", "shift", "slots", "staging_for")

    def __init__(self, number: int, ident: int | None = None, staging_for: int = 0) -> None:
        self.shift = number * SLOT_BITS
        self.ident = number if ident is None else ident
        self.staging_for = staging_for
        self.slots: list[list[WheelEntry[T]]] = [[] for _ in range(SLOTS)]
        self.occupied = 0
        self.mins = [UNKNOWN] * SLOTS

    def take(self, slot: int) -> list[WheelEntry[T]]:
        """Empty ``slot`` and return its entries (still marked as in this level)."""
        entries = self.slots[slot]
        self.slots[slot] = []
        self.occupied &= ~(1 << slot)
        self.mins[slot] = UNKNOWN
        return entries

    def min_tick(self, slot: int) -> int:
        """The earliest tick in non-empty ``slot`` of a live level ``>= 1``: kept from the last
        call unless it was forgotten since (then one scan of the slot)."""
        best = self.mins[slot]
        if best == UNKNOWN:
            best = self.scan_min(slot)
            self.mins[slot] = best
        return best

    def scan_min(self, slot: int) -> int:
        """The earliest tick in non-empty ``slot``, by a scan (nothing kept)."""
        return min(entry.tick for entry in self.slots[slot])


def spread(entries: Iterable[WheelEntry[T]], levels: Sequence[Level[T]], origin: int) -> None:
    """File each entry into ``levels`` (indexed by level number) where it belongs relative to
    the cursor ``origin``: the cascade of a slot (``levels`` the live levels, ``origin`` the
    slot's start) and the staging of one (``levels`` its staging levels).

    It keeps each target slot's known earliest tick exact (``Level.mins``).

    Every entry must be at or after ``origin`` and below ``len(levels)`` levels from it (true
    of the entries of one slot of level ``len(levels)``). This is the hottest loop of a cascade,
    so :func:`~.slots.level_for` and :func:`~.slots.slot_for` are inlined here.
    """
    for entry in entries:
        tick = entry.tick
        lower = levels[(((tick ^ origin) | SLOT_MASK).bit_length() - 1) // SLOT_BITS]  # level_for
        index = (tick >> lower.shift) & SLOT_MASK  # slot_for
        bucket = lower.slots[index]
        entry.where = lower.ident
        entry.pos = len(bucket)
        bucket.append(entry)
        lower.occupied |= 1 << index
        if tick < lower.mins[index]:
            lower.mins[index] = tick


def unlink(bucket: list[WheelEntry[T]], entry: WheelEntry[T]) -> None:
    """Take ``entry`` out of ``bucket`` (a slot's list, which holds it) in O(1): the last entry
    of the list takes its place."""
    last = bucket.pop()
    if last is not entry:
        pos = entry.pos
        bucket[pos] = last
        last.pos = pos
