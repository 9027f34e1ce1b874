"""One limited handler's gate: its running count, token bucket and line of parked timers.

:class:`~wheel_engine.limits.Limits` holds a :class:`Gate` per handler registered with
``concurrency`` or ``rate`` (:mod:`wheel_engine.limit_options`) and is the starter's one seam to
them. A due timer that cannot start now is **parked** in the gate's own line
(:mod:`wheel_engine.limit_queue`), never in the starter's queue: it stays ``PENDING`` and
``QUEUED`` (so a cancel or a replace reaches it as in the queue, its entry going stale) and is
charged nothing, so a crash while it waits costs it no attempt. When the gate can start more (a
slot is released, or the token bucket has refilled, at the time the clock says: never earlier,
and no callback at all while nothing waits), it moves a batch of at most ``WAKE_BATCH`` parked
timers, as many as can start, to the **tail** of the starter's queue; the next batch moves once
the last of these is taken, in a loop callback of its own (so one start group holds at most one
batch of a backlog), or ``STALE_RECHECK`` later if one of them leaves the queue untaken. So
a timer of another handler that becomes due has at most one such batch (and the start group
under way) before it in the starter's queue, however long the backlog; and a backlog of N costs
O(1) per start: the line is never rescanned.

Order within a handler: the line is kept in ``(due, version)`` order, and a timer of a handler
whose line (or whose batch moved to the queue) holds an earlier one is parked behind it.

Everything runs on the loop thread, like the starter.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any, Final, Protocol

from wheel_engine.clock import Cancellable, Clock
from wheel_engine.cluster_hold import ClusterHold
from wheel_engine.events import EventBus
from wheel_engine.limit_options import HandlerLimits
from wheel_engine.limit_queue import WaitingLine
from wheel_engine.timer import QUEUED, Timer
from wheel_engine.token_bucket import TokenBucket

__all__ = ["REFILL_QUANTUM", "STALE_RECHECK", "WAKE_BATCH", "Gate", "Starts"]

#: Parked timers moved to the starter's queue per wake: what one handler's backlog can put in
#: front of a timer of another handler that becomes due meanwhile.
WAKE_BATCH: Final = 256
#: A refill wake waits for this many seconds' worth of tokens (at least one): a handler limited
#: to thousands of starts per second is woken a few hundred times a second, not once per token.
REFILL_QUANTUM: Final = 0.005
#: While moved timers wait in the starter's queue (the engine is saturated), the line looks again
#: this often, in case they were all cancelled there, or dropped with a partition the node lost
#: (neither tells the gate).
STALE_RECHECK: Final = 1.0


class Starts(Protocol):
    """What a gate needs of the starter: is it closing, and start more of its queue soon."""

    closing: bool

    def start_later(self) -> None: ...


class Gate:
    """One limited handler's running count, token bucket and line of parked timers."""

    __slots__ = (
        "_clock",
        "_events",
        "_queue",
        "_starts",
        "_wake_handle",
        "blocked_on",
        "bucket",
        "concurrency",
        "hold",
        "limits",
        "name",
        "parked",
        "running",
        "throttled",
        "woken",
    )

    def __init__(
        self,
        name: str,
        limits: HandlerLimits,
        clock: Clock,
        events: EventBus,
        queue: deque[Timer],
        starts: Starts,
    ) -> None:
        self.name = name
        self._clock = clock
        self._events = events
        self._queue = queue
        self._starts = starts
        self._wake_handle: Cancellable | None = None
        self.running = 0  # attempts of this handler taken by the starter and not ended
        self.parked = WaitingLine()  # waiting here, in (due, version) order
        self.woken: deque[Timer] = deque()  # moved to the starter's queue, not taken yet
        self.throttled = 0  # timers parked since start (each time one had to wait)
        self.blocked_on = "slot"  # what the line waits for: "slot", "token" or "row"
        self.hold = ClusterHold()  # cluster scope: the database refused for a while
        self.limits = limits
        self.concurrency: int | None = None
        self.bucket: TokenBucket | None = None
        self.configure(limits)

    def configure(self, limits: HandlerLimits) -> None:
        """New limits (a re-registration): running attempts and parked timers are kept."""
        self.limits = limits
        self.concurrency = limits.concurrency
        if limits.rate is None or limits.burst is None:
            self.bucket = None
        else:
            self.bucket = TokenBucket(limits.rate, limits.burst, self._clock.time())
        self.wake()

    # ------------------------------------------------------------------ the start path
    def arrive(self, timer: Timer, now: float) -> None:
        """A due timer of this handler (``QUEUED``, off the trigger): to the tail of the
        starter's queue if it can start now and none of this handler waits before it, else
        straight into the line. Never into the shared queue to wait there: other handlers'
        timers are never queued behind this handler's backlog."""
        woken = self.woken
        if (
            not self.parked
            and (not woken or (woken[-1].due, woken[-1].seq) <= (timer.due, timer.seq))
            and self._room(now) > len(woken)
        ):
            self._queue.append(timer)
            woken.append(timer)
        else:
            self._line(timer, now)

    def admit(self, timer: Timer, now: float) -> bool:
        """May ``timer`` (at the head of the starter's queue) start now? If not, it leaves the
        queue and is parked here, still PENDING and uncharged. Takes nothing: :meth:`took` does,
        once the starter took it."""
        first = self._first_waiting()
        if first is not None and (first.due, first.seq) < (timer.due, timer.seq):
            self._park(timer, now)  # an earlier one of this handler waits: behind it
            return False
        if self.concurrency is not None and self.running >= self.concurrency:
            self.blocked_on = "slot"
            self._park(timer, now)
            return False
        bucket = self.bucket
        if bucket is not None and not bucket.can_take(now):
            self.blocked_on = "token"
            self._park(timer, now)
            self._wake_at_refill()
            return False
        return True

    def took(self, timer: Timer, now: float) -> None:
        """The starter takes ``timer`` (admitted): a slot and a token are its own now."""
        self.running += 1
        if self.bucket is not None:
            self.bucket.take(now)
        woken = self.woken
        if woken and woken[0] is timer:  # still QUEUED until the starter charges it
            woken.popleft()
        if self.parked and not self._outstanding():
            self._wake_soon()  # the last woken one is taken: the next batch, if it can start

    def release(self) -> None:
        """One of this handler's attempts ended (or was given back before it ran)."""
        if self.running > 0:
            self.running -= 1
        if self.parked and not self._outstanding():
            self.wake()

    def wake(self) -> None:
        """Move what can start now from the line to the tail of the starter's queue."""
        handle = self._wake_handle
        if handle is not None:
            handle.cancel()
            self._wake_handle = None
        if not self.parked or self._starts.closing:
            return
        if self._outstanding():  # the last one taken wakes the line; a cancelled one would not
            self._wake_handle = self._clock.call_at(self._clock.time() + STALE_RECHECK, self.wake)
            return
        now = self._clock.time()
        room = self._room(now)
        if room <= 0:
            if self.blocked_on == "token":
                self._wake_at_refill()
            elif self.hold.until() > now:
                self._wake_handle = self._clock.call_at(self.hold.until(), self.wake)
            return  # else a release wakes the line
        parked = self.parked
        queue = self._queue
        woken = self.woken
        moved = 0
        while moved < room:
            timer = parked.pop()  # cancelled or replaced ones are dropped on the way
            if timer is None:
                break
            queue.append(timer)
            woken.append(timer)
            moved += 1
        if moved:
            self._starts.start_later()
            # Taking the last of them wakes the line (took); one cancelled, or dropped with a
            # partition the node lost, before the starter took it would not: look again then.
            self._wake_handle = self._clock.call_at(now + STALE_RECHECK, self.wake)

    def put_back(self, timer: Timer, now: float) -> None:
        """``timer`` was admitted, then refused by the store (cluster scope) and uncharged."""
        timer.where = QUEUED
        self._line(timer, now)

    def close(self) -> None:
        """The engine closes: no more wakes (the parked timers stay PENDING, uncharged)."""
        if self._wake_handle is not None:
            self._wake_handle.cancel()
            self._wake_handle = None

    def release_all(self) -> list[Timer]:
        """The handler is registered again without limits: every parked timer, to queue."""
        self.close()
        timers = list(self.parked.drain())
        self.woken.clear()
        return timers

    def stalled(self) -> bool:
        """Timers are parked and nothing is set to wake them: no refill wake, no woken one."""
        return bool(self.parked) and self._wake_handle is None and not self._outstanding()

    # ------------------------------------------------------------------ reading
    def waiting(self) -> int:
        """Timers parked here (a timer cancelled while it waited counts until it reaches the
        head of the line: counting exactly would cost a hook in every cancel)."""
        return len(self.parked)

    def describe(self) -> dict[str, Any]:
        """Its limits, running, waiting by what the line waits for, throttled."""
        figures = {**self.limits.describe(), "running": self.running}
        figures.update(dict.fromkeys(("waiting_slot", "waiting_token", "waiting_row"), 0))
        figures[f"waiting_{self.blocked_on}"] = self.waiting()
        figures["throttled"] = self.throttled
        return figures

    # ------------------------------------------------------------------ the line
    def _room(self, now: float) -> int:
        """How many may be moved to the starter's queue now, at most ``WAKE_BATCH`` (and what
        the line waits for, when none)."""
        room = WAKE_BATCH
        held = self.hold.blocking(now)
        if held is not None:
            self.blocked_on = held
            return 0
        if self.concurrency is not None:
            room = min(room, self.concurrency - self.running)
            if room <= 0:
                self.blocked_on = "slot"
                return 0
        if self.bucket is not None:
            room = min(room, self.bucket.whole(now))
            if room <= 0:
                self.blocked_on = "token"
                return 0
        return room

    def _outstanding(self) -> bool:
        """Some timers moved to the starter's queue are not taken yet (drops the others)."""
        woken = self.woken
        while woken and woken[0].where != QUEUED:  # taken (or cancelled): no longer waiting
            woken.popleft()
        return bool(woken)

    def _first_waiting(self) -> Timer | None:
        """The earliest timer of this handler still waiting: woken or parked."""
        if self._outstanding():
            return self.woken[0]
        return self.parked.first()

    def _park(self, timer: Timer, now: float) -> None:
        """``timer``, at the head of the starter's queue, may not start: into the line."""
        self._queue.popleft()  # it is the queue's head (see admit)
        woken = self.woken
        if woken and woken[0] is timer:  # moved to the queue, refused there after all
            woken.popleft()
        self._line(timer, now)

    def _line(self, timer: Timer, now: float) -> None:
        self.parked.push(timer)
        self.throttled += 1
        if self._events.active:
            self._events.throttled(timer, now)
        if self._wake_handle is None and not self._outstanding():
            self.wake()  # behind an earlier one: make sure something wakes the line

    def _wake_soon(self) -> None:
        """Wake the line in a loop callback of its own, not inside the start group being taken:
        its batch joins the queue's tail behind what came due meanwhile, and a start group
        holds at most one batch of this handler's backlog. It replaces a later wake (the
        stale recheck of the batch just taken, or a refill wake, which ``wake`` sets again)."""
        if self._starts.closing:
            return
        handle = self._wake_handle
        if handle is not None:
            handle.cancel()
        self._wake_handle = self._clock.call_at(self._clock.time(), self.wake)

    def _wake_at_refill(self) -> None:
        bucket = self.bucket
        if self._wake_handle is not None or bucket is None or self._starts.closing:
            return
        when = bucket.ready_at(max(1.0, bucket.rate * REFILL_QUANTUM))
        when = max(when, math.nextafter(self._clock.time(), math.inf))  # later, never again now
        self._wake_handle = self._clock.call_at(when, self.wake)
