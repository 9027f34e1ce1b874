"""A limited handler's line of waiting timers, in ``(due, version)`` order (:mod:`.limits`).

Due timers mostly arrive in due order (the trigger hands them on in tick order), so the line is
a FIFO ``deque`` that takes them at O(1), plus a heap for the few that arrive earlier than its
tail: a past due (recovery, a re-registration), a quick retry, a refused start put back, or
dues unordered within one tick. The next to start is the earlier of the two heads. So a backlog
of N costs O(1) per timer in and out in the common case, O(log k) for the k out of order, and
never a rescan of N.

A timer cancelled or replaced while it waits keeps its entry (its ``where`` is no longer
``QUEUED``); the entry is dropped when it reaches the head. Everything runs on the loop thread.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Iterator

from wheel_engine.timer import QUEUED, Timer

__all__ = ["WaitingLine"]


class WaitingLine:
    """Waiting timers of one handler; :meth:`first` / :meth:`pop` give them in (due, version)
    order (equal keys: in arrival order)."""

    __slots__ = ("_arrivals", "_early", "_fifo")

    def __init__(self) -> None:
        self._fifo: deque[Timer] = deque()  # in (due, seq) order: each at or after the last
        self._early: list[tuple[float, int, int, Timer]] = []  # heap: arrived out of order
        self._arrivals = itertools.count()  # ties in the heap: never compares timers

    def __len__(self) -> int:
        """Entries, stale ones included (see the module docstring)."""
        return len(self._fifo) + len(self._early)

    def __bool__(self) -> bool:
        return bool(self._fifo) or bool(self._early)

    def push(self, timer: Timer) -> None:
        fifo = self._fifo
        if not fifo or (fifo[-1].due, fifo[-1].seq) <= (timer.due, timer.seq):
            fifo.append(timer)  # the common case: due after everything waiting
        else:
            heapq.heappush(self._early, (timer.due, timer.seq, next(self._arrivals), timer))

    def first(self) -> Timer | None:
        """The earliest timer still waiting (stale entries at the heads dropped), or None."""
        fifo = self._fifo
        early = self._early
        while fifo and fifo[0].where != QUEUED:
            fifo.popleft()
        while early and early[0][3].where != QUEUED:
            heapq.heappop(early)
        if not early:
            return fifo[0] if fifo else None
        head = early[0]
        if fifo and (fifo[0].due, fifo[0].seq) < (head[0], head[1]):
            return fifo[0]
        return head[3]

    def pop(self) -> Timer | None:
        """Take :meth:`first` out of the line."""
        timer = self.first()
        if timer is None:
            return None
        if self._fifo and self._fifo[0] is timer:
            self._fifo.popleft()
        else:
            heapq.heappop(self._early)
        return timer

    def drain(self) -> Iterator[Timer]:
        """Every timer still waiting, in order, the line emptied as they are taken."""
        while (timer := self.pop()) is not None:
            yield timer

    def clear(self) -> None:
        self._fifo.clear()
        self._early.clear()
