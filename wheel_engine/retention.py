"""The retention window: finished timers in finishing order, without a rehash on the fire path.

Every SUCCEEDED or CANCELED timer that is still its key's latest version enters the window when
it finishes and stays readable until it is older than ``retention`` seconds or more than
``max_retained`` are kept; then :meth:`RetentionWindow.purge` forgets the oldest, from the
window and from the table's index by key. A ``deque``, not an ``OrderedDict``: it appends in
O(1) and never moves its entries, where a dict rehashes as it grows, while a burst fires.

A deque cannot drop an entry from its middle, so a timer that stops being retained (replaced by
a new version, forgotten by a node, un-cancelled, taken back) leaves its entry behind, stale.
An entry is *live* when its timer is still its key's timer in ``timers``, still SUCCEEDED or
CANCELED, and still has the ``updated_at`` it had when it entered (the entry keeps that float):
a timer that left and re-entered (un-cancelled, then finished again) has a newer entry, and the
old one is stale. Stale entries are dropped when they reach the front, and never count.

Guaranteed: ``len(window)`` is the number of retained timers (those live, as the callers keep
it: :meth:`add` when a timer starts being retained, :meth:`discard` before it stops), iteration
yields their keys oldest first, and :meth:`purge` forgets oldest first, O(1) per entry dropped.
Not guaranteed: when the same timer entered twice with the same ``updated_at`` (a replace whose
commit failed puts the old version back), it is forgotten at its first entry's place.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from typing import Final

from wheel_engine.model import TimerState
from wheel_engine.timer import Timer

_SUCCEEDED: Final = TimerState.SUCCEEDED
_CANCELED: Final = TimerState.CANCELED

#: Stale entries tolerated beyond the retained ones before the deques are rebuilt without them
#: (a key replaced over and over keeps its old versions alive until then).
COMPACT_SLACK: Final = 4096


class RetentionWindow:
    """Retained finished timers, oldest first; see the module docstring. Loop thread only."""

    __slots__ = (
        "_append_stamp",
        "_append_timer",
        "_order",
        "_stamps",
        "_timers",
        "max_retained",
        "retained",
        "retention",
    )

    def __init__(self, timers: dict[str, Timer], retention: float, max_retained: int) -> None:
        self._timers = timers  # the table's index by key, shared: forgetting deletes from it
        self.retention = retention
        self.max_retained = max_retained
        self._order: deque[Timer] = deque()  # in finishing order, live and stale entries
        self._stamps: deque[float] = deque()  # each entry's updated_at when it entered
        # The deques' bound appends: calling deque.append by name looks the method up on every
        # call, most of an add's cost.
        self._append_timer: Callable[[Timer], None] = self._order.append
        self._append_stamp: Callable[[float], None] = self._stamps.append
        self.retained = 0  # live entries: what max_retained bounds

    def __len__(self) -> int:
        return self.retained

    def entries(self) -> int:
        """Entries held, live and stale: what the window costs in memory (tests read it)."""
        return len(self._order)

    def __iter__(self) -> Iterator[str]:
        """The keys of the retained timers, oldest first."""
        seen: set[str] = set()
        for timer, stamp in zip(self._order, self._stamps, strict=True):
            if self._live(timer, stamp) and timer.key not in seen:
                seen.add(timer.key)
                yield timer.key

    def _live(self, timer: Timer, stamp: float) -> bool:
        state = timer.state
        return (
            (state is _SUCCEEDED or state is _CANCELED)
            and timer.updated_at == stamp
            and self._timers.get(timer.key) is timer
        )

    def add(self, timer: Timer) -> None:
        """``timer`` (SUCCEEDED or CANCELED, its key's timer in ``timers``) is retained now."""
        self._append_timer(timer)
        self._append_stamp(timer.updated_at)
        self.retained += 1

    def discard(self, timer: Timer) -> None:
        """``timer`` is about to stop being retained (replaced, forgotten, un-cancelled, taken
        back): no longer counted. Call it before the change; a timer not retained is ignored."""
        state = timer.state
        if (state is _SUCCEEDED or state is _CANCELED) and self._timers.get(timer.key) is timer:
            self.retained -= 1

    def reset(self, timers: list[Timer]) -> None:
        """The window holds ``timers`` (retained, oldest first) and nothing else."""
        self._hold(deque(timers), deque([timer.updated_at for timer in timers]))
        self.retained = len(timers)

    def _hold(self, order: deque[Timer], stamps: deque[float]) -> None:
        self._order = order
        self._stamps = stamps
        self._append_timer = order.append
        self._append_stamp = stamps.append

    def purge(self, now: float) -> None:
        """Forget retained timers older than ``retention`` and the oldest beyond
        ``max_retained``; drop the stale entries met on the way. O(1) when nothing is due."""
        order = self._order
        if not order:
            return
        stamps = self._stamps
        timers = self._timers
        horizon = now - self.retention
        while order:
            timer = order[0]
            stamp = stamps[0]
            if self._live(timer, stamp):
                if self.retained <= self.max_retained and stamp > horizon:
                    break
                del timers[timer.key]
                self.retained -= 1
            order.popleft()
            stamps.popleft()
        if len(order) > 2 * self.retained + COMPACT_SLACK:
            self._compact()

    def _compact(self) -> None:
        """Rebuild the deques without their stale entries: O(entries), amortised O(1) per stale
        entry, since at least as many stale entries as live ones accrued since the last one."""
        live = [
            (timer, stamp)
            for timer, stamp in zip(self._order, self._stamps, strict=True)
            if self._live(timer, stamp)
        ]
        self._hold(deque([timer for timer, _ in live]), deque([stamp for _, stamp in live]))
