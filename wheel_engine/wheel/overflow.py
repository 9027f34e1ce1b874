"""Entries beyond the wheel's horizon: a binary heap with lazy deletion."""

from __future__ import annotations

import heapq
from itertools import count
from typing import Final, Generic, TypeVar

from .entry import DETACHED, OVERFLOW, WheelEntry

T = TypeVar("T")

#: Rebuild the heap once it holds more dead than live entries and at least this many dead.
REBUILD_MIN_DEAD: Final = 64


class OverflowHeap(Generic[T]):
    """A min-heap of ``(tick, seq, counter, entry)`` for entries past the top level.

    Removal is lazy: :meth:`discard` only marks the entry ``DETACHED`` and counts it dead; dead
    entries are skipped when they reach the top and the heap is rebuilt without them when more
    than half of it is dead, so its size stays within twice the live count (plus a constant).
    The counter breaks ties between equal ``(tick, seq)`` so entries are never compared.
    """

    __slots__ = ("_counter", "_dead", "_heap")

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, int, WheelEntry[T]]] = []
        self._counter = count()
        self._dead = 0

    def __len__(self) -> int:
        """Number of live entries."""
        return len(self._heap) - self._dead

    def live(self) -> list[WheelEntry[T]]:
        """The live entries, in no particular order (for checks; O(n))."""
        return [node[3] for node in self._heap if node[3].where == OVERFLOW]

    def push(self, entry: WheelEntry[T]) -> None:
        entry.where = OVERFLOW
        heapq.heappush(self._heap, (entry.tick, entry.seq, next(self._counter), entry))

    def discard(self, entry: WheelEntry[T]) -> None:
        entry.where = DETACHED
        self._dead += 1
        if self._dead >= REBUILD_MIN_DEAD and self._dead * 2 > len(self._heap):
            self._heap = [node for node in self._heap if node[3].where == OVERFLOW]
            heapq.heapify(self._heap)
            self._dead = 0

    def _prune(self) -> None:
        heap = self._heap
        while heap and heap[0][3].where != OVERFLOW:
            heapq.heappop(heap)
            self._dead -= 1

    def min_tick(self) -> int | None:
        """The earliest live tick, or None when no live entry is left."""
        self._prune()
        return self._heap[0][0] if self._heap else None

    def pop_before(self, end: int) -> list[WheelEntry[T]]:
        """Remove and return, in (tick, seq) order, every live entry with ``tick < end``."""
        heap = self._heap
        out: list[WheelEntry[T]] = []
        while heap and heap[0][0] < end:
            entry = heapq.heappop(heap)[3]
            if entry.where == OVERFLOW:
                out.append(entry)
            else:
                self._dead -= 1
        return out

    def take_block(
        self, top_shift: int, target: int
    ) -> tuple[int, int, list[WheelEntry[T]]] | None:
        """Remove the block of ``1 << top_shift`` ticks that holds the earliest live entry, if
        it starts at or before ``target``: ``(start, end, its entries in (tick, seq) order)``.
        None (and nothing removed) if the heap is empty or the block starts after ``target``."""
        first = self.min_tick()
        if first is None:
            return None
        start = (first >> top_shift) << top_shift
        if start > target:
            return None
        end = start + (1 << top_shift)
        return start, end, self.pop_before(end)
