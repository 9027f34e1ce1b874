"""Flow control per handler: the gates that hold a limited handler's due timers back.

A handler registered with ``concurrency`` or ``rate`` (:mod:`wheel_engine.limit_options`) gets
a :class:`~wheel_engine.limit_gate.Gate` (which parks what may not start yet, and says why). While
any handler is limited, the starter (:mod:`wheel_engine.starting`) hands each due timer of a
limited handler to its gate (:meth:`Limits.arrive`) instead of its own queue, asks
:meth:`Limits.admit` right before it takes a due timer into a start group, and tells
:meth:`Limits.release` when an attempt ended (or was given back). Nothing else of the start path
knows about limits, and the starter alone decides when to ask: it tests :attr:`Limits.gates`
once per start group, and while that is empty (no handler is limited) asks nothing per timer.

Everything runs on the loop thread, like the starter.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Any

from wheel_engine.clock import Clock
from wheel_engine.events import EventBus
from wheel_engine.limit_gate import WAKE_BATCH, Gate, Starts
from wheel_engine.limit_options import HandlerLimits
from wheel_engine.timer import QUEUED, Timer
from wheel_engine.token_bucket import TokenBucket

__all__ = ["WAKE_BATCH", "Gate", "Limits", "TokenBucket"]


class Limits:
    """The gates of one engine's limited handlers, by handler name."""

    __slots__ = ("_clock", "_events", "_queue", "_starts", "cluster", "gates")

    def __init__(self, clock: Clock, events: EventBus, queue: deque[Timer], starts: Starts) -> None:
        self._clock = clock
        self._events = events
        self._queue = queue
        self._starts = starts
        self.gates: dict[str, Gate] = {}  # empty while no handler is limited: one test per start
        self.cluster: frozenset[str] = frozenset()  # scope "cluster": parts apart (start_parts)

    def configure(self, name: str, limits: HandlerLimits | None) -> None:
        """Handler ``name`` is (re-)registered with ``limits``."""
        gate = self.gates.get(name)
        if limits is None:
            if gate is not None:
                del self.gates[name]
                self._queue.extend(gate.release_all())
                self._starts.start_later()
        elif gate is None:
            self.gates[name] = Gate(
                name, limits, self._clock, self._events, self._queue, self._starts
            )
        else:
            gate.configure(limits)
        self.cluster = frozenset(n for n, g in self.gates.items() if g.limits.scope == "cluster")

    def arrive(self, timer: Timer, now: float) -> bool:
        """A due timer, off the trigger: True if its handler is limited and its gate took it
        (:meth:`Gate.arrive`); False: it joins the starter's queue."""
        gate = self.gates.get(timer.handler)
        if gate is None:
            return False
        gate.arrive(timer, now)
        return True

    def release(self, timer: Timer) -> None:
        """``timer``'s attempt ended: its handler's slot is free."""
        gate = self.gates.get(timer.handler) if self.gates else None
        if gate is not None:
            gate.hold.slot_until = 0.0  # a slot of the cluster's is free: this one
            gate.release()

    def release_all(self, timers: Iterable[Timer]) -> None:
        gates = self.gates
        for timer in timers if gates else ():
            gate = gates.get(timer.handler)
            if gate is not None:
                gate.release()

    def admit(self, timer: Timer) -> bool:
        """May ``timer``, at the head of the starter's queue, be taken into the start group now?
        True: its slot and token (if its handler is limited) are taken, as the starter takes it
        at once. False: it is parked (out of the queue, PENDING, uncharged), the group ends
        there, and the starter is asked to go on in a callback of its own later."""
        if timer.where != QUEUED:
            return True
        gate = self.gates.get(timer.handler)
        if gate is None:
            return True
        now = self._clock.time()
        if gate.admit(timer, now):
            gate.took(timer, now)
            return True
        self._starts.start_later()
        return False

    def release_refused(
        self, timers: Iterable[Timer], kept_inline: list[Timer], kept_pooled: list[Timer]
    ) -> None:
        """Attempts a store refused (a claim lost on PostgreSQL) give their slots back."""
        if self.gates:
            kept = {id(timer) for timer in (*kept_inline, *kept_pooled)}
            self.release_all(timer for timer in timers if id(timer) not in kept)

    def close(self) -> None:
        for gate in self.gates.values():
            gate.close()

    def describe(self) -> dict[str, dict[str, Any]]:
        """Per limited handler: its limits, running, waiting for a slot or a token, throttled."""
        return {name: gate.describe() for name, gate in sorted(self.gates.items())}

    def throttled(self) -> int:
        return sum(gate.throttled for gate in self.gates.values())
