"""One timer held by a :class:`~wheel_engine.wheel.TimingWheel`."""

from __future__ import annotations

from operator import attrgetter
from typing import Final, Generic, TypeVar

T = TypeVar("T")

#: ``WheelEntry.where`` for an entry that is not held by a wheel (removed or handed out).
DETACHED: Final = -1
#: ``WheelEntry.where`` for an entry inserted at or before ``now``: due at the next advance.
DUE: Final = -2
#: ``WheelEntry.where`` for an entry beyond the top level's horizon, waiting in the overflow heap.
OVERFLOW: Final = -3

#: Sort key of the entries of one tick: by ``seq``.
by_seq = attrgetter("seq")


class WheelEntry(Generic[T]):
    """A handle on one inserted item: what the wheel reads and writes of it.

    ``tick`` and ``seq`` are what the caller inserted, ``item`` what the wheel hands out.
    ``where`` and ``pos`` say where the entry lives, so :meth:`TimingWheel.remove` is O(1):
    ``where >= 0`` is the index of the wheel's level object holding it (a live level, or a
    staging level of a slot being staged) and ``pos`` the entry's index in its slot's list, or
    ``where`` is one of :data:`DUE`, :data:`OVERFLOW` and :data:`DETACHED`. The slot itself is
    not stored: it is ``slot_for`` of the entry's tick at that level (``tick >> shift``, masked),
    and the tick does not change while the entry is in. Entries compare and hash by identity.

    The base class holds no item: :class:`ItemEntry` (what :meth:`TimingWheel.insert` makes)
    holds one, and a caller may embed the entry in its own object instead, a subclass whose
    ``item`` is itself (``wheel_engine.timer.Timer``), so that an item costs one object and no
    slot is spent on a reference to itself.
    """

    __slots__ = ("pos", "seq", "tick", "where")

    def __init__(self, tick: int, seq: int) -> None:
        self.tick = tick
        self.seq = seq
        self.where = DETACHED
        self.pos = 0

    @property
    def item(self) -> T:
        """The inserted item. A property, not an attribute, so that a subclass can define it
        (compiled code reads an attribute of a native class from its slot, bypassing a
        subclass's property, but calls an overridden property)."""
        raise NotImplementedError

    @property
    def active(self) -> bool:
        """True while the entry is held by a wheel (not removed, not yet handed out)."""
        return self.where != DETACHED

    def __repr__(self) -> str:
        return f"{type(self).__name__}(tick={self.tick}, seq={self.seq}, item={self.item!r})"


def hand_out(entries: list[WheelEntry[T]], out: list[T]) -> None:
    """Append the items of ``entries`` to ``out`` in ``(tick, seq)`` order, each entry marked
    :data:`DETACHED` (handed out). Equal ``(tick, seq)`` pairs keep their order in ``entries``.

    Why not one sort keyed by ``(tick, seq)``: that key makes a tuple per entry and each of the
    ``n log n`` comparisons compares two tuples; a slot handed out whole holds up to a few ticks
    of every timer. Grouping by tick first leaves a sort of the (few) distinct ticks and, per
    tick, one by ``seq`` of a run that is already in order when the timers came in ``seq``
    order (one ``schedule_many``), which the sort finds in one pass.
    """
    by_tick: dict[int, list[WheelEntry[T]]] = {}
    for entry in entries:
        tick = entry.tick
        same = by_tick.get(tick)
        if same is None:
            by_tick[tick] = [entry]
        else:
            same.append(entry)
    for tick in sorted(by_tick):
        same = by_tick[tick]
        if len(same) > 1:
            same.sort(key=by_seq)
        for entry in same:
            entry.where = DETACHED
            out.append(entry.item)


class ItemEntry(WheelEntry[T]):
    """An entry holding a separate item: what :meth:`TimingWheel.insert` returns."""

    __slots__ = ("_item",)

    def __init__(self, tick: int, seq: int, item: T) -> None:
        super().__init__(tick, seq)
        self._item = item

    @property
    def item(self) -> T:
        return self._item
