"""The retention window: finished timers in finishing order, without a rehash on the fire path.

Every SUCCEEDED or CANCELED timer that is still its key's latest version enters the window when
it finishes and stays readable until it is older than ``retention`` seconds or more than
``max_retained`` are kept; then :meth:`RetentionWindow.purge` forgets the oldest, from the
window and from the table's index by key. A ``deque`` of the timers alone, not an
``OrderedDict`` and no per-timer key or stamp: entering is one append, which never rehashes or
moves an entry while a burst fires, and the key -> timer lookup stays the table's own dict. The
finishing time a purge compares is the timer's own ``updated_at``, which no transition changes
while it is retained (each way out of a finished state goes through :meth:`discard` first).

A deque cannot drop an entry from its middle, so a timer that stops being retained (replaced by
a new version, forgotten by a node, un-cancelled, taken back) leaves its entry behind, stale:
:meth:`discard` marks it, counting per timer how many of its entries are stale. Those are
always its oldest ones (a timer has at most one live entry, its newest: it enters again only
after it left), so a mark is used up by the first entry of that timer that reaches the front,
and a timer that left and entered again (un-cancelled, then finished again; taken back) keeps
its newer entry. Stale entries are dropped when they reach the front, and never count. The
marks are a dict touched only on those rare paths: the fire path pays one truth test of it.

Guaranteed, as long as the callers keep the rule (:meth:`add` when a timer starts being
retained, and only then; :meth:`discard` before it stops): ``len(window)`` is the number of
retained timers, iteration yields their keys oldest first, and :meth:`purge` forgets oldest
first, O(1) per entry dropped.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from typing import Final

from wheel_engine.key_index import KeyIndex
from wheel_engine.model import TimerState
from wheel_engine.timer import Timer

_SUCCEEDED: Final = TimerState.SUCCEEDED
_CANCELED: Final = TimerState.CANCELED

#: Stale entries tolerated beyond the retained ones before the deque is rebuilt without them
#: (a key replaced over and over keeps its old versions alive until then).
COMPACT_SLACK: Final = 4096


def _use_mark(marks: dict[Timer, int], timer: Timer) -> bool:
    """True if ``marks`` says ``timer``'s oldest entry is stale; that mark is used up."""
    left = marks.get(timer)
    if left is None:
        return False
    if left == 1:
        del marks[timer]
    else:
        marks[timer] = left - 1
    return True


class RetentionWindow:
    """Retained finished timers, oldest first; see the module docstring. Loop thread only."""

    __slots__ = ("_append", "_order", "_stale", "_timers", "max_retained", "retained", "retention")

    def __init__(self, timers: KeyIndex, retention: float, max_retained: int) -> None:
        self._timers = timers  # the table's index by key, shared: forgetting deletes from it
        self.retention = retention
        self.max_retained = max_retained
        self._order: deque[Timer] = deque()  # in finishing order, live and stale entries
        # The deque's bound append: calling deque.append by name looks the method up on every
        # call, most of an add's cost.
        self._append: Callable[[Timer], None] = self._order.append
        self._stale: dict[Timer, int] = {}  # timer -> how many of its (oldest) entries are stale
        self.retained = 0  # live entries: what max_retained bounds

    def __len__(self) -> int:
        return self.retained

    def entries(self) -> int:
        """Entries held, live and stale: what the window costs in memory (tests read it)."""
        return len(self._order)

    def __iter__(self) -> Iterator[str]:
        """The keys of the retained timers, oldest first."""
        marks = dict(self._stale)
        for timer in self._order:
            if not (marks and _use_mark(marks, timer)):
                yield timer.key

    def add(self, timer: Timer) -> None:
        """``timer`` (SUCCEEDED or CANCELED, its key's timer in ``timers``, not retained yet)
        is retained now."""
        self._append(timer)
        self.retained += 1

    def discard(self, timer: Timer) -> None:
        """``timer`` is about to stop being retained (replaced, forgotten, un-cancelled, taken
        back): no longer counted, its entry stale. Call it before the change; a timer not
        retained (not finished, or not its key's timer any more) is ignored."""
        state = timer.state
        if (state is _SUCCEEDED or state is _CANCELED) and self._timers.holds(timer):
            self.retained -= 1
            stale = self._stale
            stale[timer] = stale.get(timer, 0) + 1

    def reset(self, timers: list[Timer]) -> None:
        """The window holds ``timers`` (retained, oldest first) and nothing else."""
        self._hold(deque(timers))
        self.retained = len(timers)

    def _hold(self, order: deque[Timer]) -> None:
        self._order = order
        self._append = order.append
        self._stale = {}

    def purge(self, now: float) -> None:
        """Forget retained timers older than ``retention`` and the oldest beyond
        ``max_retained``; drop the stale entries met on the way. O(1) when nothing is due."""
        order = self._order
        if not order:
            return
        stale = self._stale
        timers = self._timers
        horizon = now - self.retention
        while order:
            timer = order[0]
            if not (stale and _use_mark(stale, timer)):
                if self.retained <= self.max_retained and timer.updated_at > horizon:
                    break
                timers.delete(timer)
                self.retained -= 1
            order.popleft()
        if len(order) > 2 * self.retained + COMPACT_SLACK:
            self._compact()

    def _compact(self) -> None:
        """Rebuild the deque without its stale entries: O(entries), amortised O(1) per stale
        entry, since at least as many stale entries as live ones accrued since the last one."""
        marks = self._stale
        self._hold(
            deque([timer for timer in self._order if not (marks and _use_mark(marks, timer))])
        )
