"""Events: one value per state change of a timer, delivered on the loop to subscribers.

``engine.on_event(callback)`` forwards to :meth:`EventBus.subscribe`; the engine calls the
emit methods (:meth:`EventBus.fired` and the others) at each state change. Metrics
(:mod:`wheel_engine.metrics`) and user hooks are built on it.

Guaranteed:

- one :class:`Event` per change, emitted by the engine on its loop thread, synchronously, right
  after the change is made in memory (so ``engine.get(key)`` in a callback already shows it);
  a change its caller waits to see committed (``schedule``, ``schedule_many``, ``cancel`` of a
  pending timer, ``redrive``) is emitted once it is committed, and never if it was undone;
- an event never carries the payload (it can hold personal data; a hook that needs it calls
  ``engine.get(event.key)``);
- a raising callback never breaks the engine nor the other subscribers: the first failure of each
  subscription is one WARNING line (the callback, the event's kind, key and version, the
  exception's type), with its traceback at DEBUG; further failures of it are counted in
  :attr:`EventBus.failures`, not logged (no per-timer logging). It stays subscribed.

Not guaranteed: events are not durable (a crash loses those not delivered yet, and recovery
emits none for the timers it restores); a callback must not block, as it runs on the loop.

Cost: the engine tests :attr:`EventBus.active` (a slot read, not ``if bus:``, which would be a
Python call) before it calls an emit method, so with nobody subscribed an emit point costs that
test alone (figures: ``docs/design.md``, "Measured in the core").
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from typing import NamedTuple, Protocol

__all__ = ["Event", "EventBus", "EventKind", "Subscriber", "TimerLike"]

logger = logging.getLogger(__name__)

_new_tuple = tuple.__new__


class EventKind(enum.StrEnum):
    """What changed (SPEC's names). Each event is about one version of one key."""

    SCHEDULED = "scheduled"  #: scheduled or replaced (a new version); committed
    FIRED = "fired"  #: an attempt started, its attempt committed; ``lateness`` is set
    SUCCEEDED = "succeeded"  #: the handler returned normally: SUCCEEDED
    RETRY = "retry"  #: a failed attempt will run again, at ``due``
    DEAD = "dead"  #: given up: attempts or deadline spent, PermanentError, interrupted last try
    CANCELED = "canceled"  #: cancelled while pending (committed), or a running attempt stopped
    REDRIVEN = "redriven"  #: a DEAD timer went back to PENDING as a new version; committed
    #: due, but held back by its handler's ``concurrency`` or ``rate``: PENDING, not charged
    THROTTLED = "throttled"
    #: a recurrence was scheduled or replaced (``key``: its name; ``due``: its first occurrence)
    RECURRENCE_SCHEDULED = "recurrence_scheduled"
    RECURRENCE_CANCELED = "recurrence_canceled"  #: a recurrence was cancelled (``key``: its name)


class Event(NamedTuple):
    """One state change. Fields that do not apply to a kind are None."""

    kind: EventKind
    key: str
    version: int
    handler: str
    due: float  #: epoch seconds; after the change (for ``retry``: when it runs next)
    at: float  #: epoch seconds (wall clock) the change was made
    lateness: float | None  #: ``fired`` only: seconds from ``due`` to the attempt's start
    attempt: int  #: attempts charged to this version so far (1-based while one runs)
    duration: float | None  #: seconds the handler ran (end of an attempt that ran), else None
    error: str | None  #: ``retry``/``dead``: the timer's bounded ``last_error`` text


#: What a subscriber is: called with each event, on the loop; its return value is ignored.
Subscriber = Callable[[Event], object]


class TimerLike(Protocol):
    """What an emit method reads of the engine's timer (``wheel_engine.timer.Timer`` fits)."""

    @property
    def key(self) -> str: ...

    version: int
    handler: str
    due: float
    attempts: int


class _Subscription:
    """One ``subscribe`` call; calling it unsubscribes (once: a second call does nothing)."""

    __slots__ = ("_bus", "callback", "failures")

    def __init__(self, bus: EventBus, callback: Subscriber) -> None:
        self._bus = bus
        self.callback = callback
        self.failures = 0

    def __call__(self) -> None:
        self._bus._remove(self)


class EventBus:
    """The subscribers of one engine and the emit methods its loop calls.

    Subscribe and unsubscribe on the loop thread (or before the engine starts). A callback
    may unsubscribe itself or others while an event is delivered: that event still reaches the
    subscribers that were there when it was emitted.
    """

    __slots__ = ("_subscriptions", "active", "failures")

    def __init__(self) -> None:
        # A tuple, replaced on every (un)subscribe: delivery iterates it without a copy.
        self._subscriptions: tuple[_Subscription, ...] = ()
        #: True while anyone is subscribed: the engine tests it before building an event.
        self.active = False
        #: Callback failures since start, over all subscriptions (each logged once).
        self.failures = 0

    def __bool__(self) -> bool:
        return self.active

    def __len__(self) -> int:
        return len(self._subscriptions)

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Call ``callback(event)`` for every event from now on; returns the unsubscribe call.

        Subscribing the same callback twice delivers each event to it twice, and each returned
        call removes its own subscription.
        """
        if not callable(callback):
            raise TypeError(f"an event callback must be callable, not {type(callback).__name__}")
        subscription = _Subscription(self, callback)
        self._subscriptions = (*self._subscriptions, subscription)
        self.active = True
        return subscription

    def _remove(self, subscription: _Subscription) -> None:
        self._subscriptions = tuple(s for s in self._subscriptions if s is not subscription)
        self.active = bool(self._subscriptions)

    # ------------------------------------------------------------------ delivery
    def emit(self, event: Event) -> None:
        """Deliver ``event`` to every subscriber, in subscription order; never raises."""
        for subscription in self._subscriptions:
            try:
                subscription.callback(event)
            except Exception as exc:
                self._failed(subscription, event, exc)

    def _failed(self, subscription: _Subscription, event: Event, exc: Exception) -> None:
        self.failures += 1
        subscription.failures += 1
        if subscription.failures > 1:
            return
        logger.warning(  # never the exception's text: it may quote data the hook looked up
            "event callback %s raised %s on a %r event (timer %s, version %d); it stays "
            "subscribed, and its further failures are counted in EventBus.failures, not logged",
            _name(subscription.callback),
            type(exc).__name__,
            event.kind.value,
            event.key,
            event.version,
        )
        logger.debug("event callback %s failed", _name(subscription.callback), exc_info=exc)

    def _emit(
        self,
        kind: EventKind,
        timer: TimerLike,
        due: float,
        at: float,
        lateness: float | None = None,
        duration: float | None = None,
        error: str | None = None,
    ) -> None:
        if self.active:  # the engine tests it first; checked again so no caller can get it wrong
            self.emit(
                _new_tuple(  # NamedTuple's own __new__ is a Python function: skip it
                    Event,
                    (
                        kind,
                        timer.key,
                        timer.version,
                        timer.handler,
                        due,
                        at,
                        lateness,
                        timer.attempts,
                        duration,
                        error,
                    ),
                )
            )

    # ------------------------------------------------------------------ what the engine calls
    def scheduled(self, timer: TimerLike, at: float) -> None:
        """``timer`` (a new version, or a replacing one) is scheduled and committed."""
        self._emit(EventKind.SCHEDULED, timer, timer.due, at)

    def fired(self, timer: TimerLike, at: float) -> None:
        """An attempt of ``timer`` starts now (``at``): its attempt is charged and committed."""
        self._emit(EventKind.FIRED, timer, timer.due, at, lateness=at - timer.due)

    def succeeded(self, timer: TimerLike, at: float, duration: float | None) -> None:
        """Its handler returned normally after ``duration`` seconds."""
        self._emit(EventKind.SUCCEEDED, timer, timer.due, at, duration=duration)

    def retry(
        self, timer: TimerLike, at: float, duration: float | None, due: float, error: str
    ) -> None:
        """An attempt failed (``error``) and the timer runs again at ``due``."""
        self._emit(EventKind.RETRY, timer, due, at, duration=duration, error=error)

    def dead(self, timer: TimerLike, at: float, duration: float | None, error: str) -> None:
        """The timer is DEAD; ``duration`` is None when no handler ran for this decision."""
        self._emit(EventKind.DEAD, timer, timer.due, at, duration=duration, error=error)

    def canceled(self, timer: TimerLike, at: float, duration: float | None = None) -> None:
        """Cancelled: pending (committed), or a running attempt that stopped (``duration``)."""
        self._emit(EventKind.CANCELED, timer, timer.due, at, duration=duration)

    def throttled(self, timer: TimerLike, at: float) -> None:
        """``timer`` is due but waits for a slot or a token of its handler (uncharged)."""
        self._emit(EventKind.THROTTLED, timer, timer.due, at)

    def redriven(self, timer: TimerLike, at: float) -> None:
        """``timer`` is the new PENDING version of a redriven DEAD timer, committed."""
        self._emit(EventKind.REDRIVEN, timer, timer.due, at)


def _name(callback: Subscriber) -> str:
    """How a callback is named in a log line: its qualified name, not its repr (no data)."""
    name = getattr(callback, "__qualname__", None) or type(callback).__qualname__
    module = getattr(callback, "__module__", None)
    return f"{module}.{name}" if module else str(name)
