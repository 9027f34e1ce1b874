"""The engine's record of one timer: one mutable object per key, shared by every index."""

from __future__ import annotations

import asyncio
import math
from typing import Any, Final

from wheel_engine.model import Firing, TimerInfo, TimerState
from wheel_engine.payload import decode_payload
from wheel_engine.wheel.entry import DETACHED, WheelEntry

#: ``Timer.payload`` of a recovered timer whose msgpack bytes (``Timer.packed``) are not decoded
#: yet: recovery decodes nothing, the first firing or ``get()`` does.
UNDECODED: Final[Any] = object()

_new_tuple: Final = tuple.__new__
_TIMER_INFO: Final = TimerInfo  # Final: a C static in compiled code, not a module lookup
_RUNNING: Final = TimerState.RUNNING

# Why a running handler is being interrupted (``Timer.interrupt``).
INTERRUPT_CANCEL = "cancel"  #: engine.cancel() asked for it
INTERRUPT_TIMEOUT = "timeout"  #: the handler ran past its timeout
#: (on a PENDING timer, set at recovery) its last attempt was cut short by a crash
INTERRUPT_CRASH = "crash"

#: ``Timer.where`` of a due timer waiting in the starter's queue (``wheel_engine.starting``):
#: out of the wheel (whose own values are all >= -3), PENDING, and not charged an attempt.
QUEUED: Final = -4


class Worker:
    """One worker task and the firing it is running: what a cancel or a timeout reaches.

    One per worker task (not per firing); ``Timer.worker`` points at it while its handler runs.
    """

    __slots__ = ("firing", "task")

    def __init__(self, task: asyncio.Task[Any]) -> None:
        self.task = task
        self.firing: Firing | None = None


class Timer(WheelEntry["Timer"]):
    """One version of one key, and its own wheel entry (``item`` is the timer itself), so a
    pending timer costs one object. ``where != DETACHED`` while it waits in the wheel; its
    ``version`` is its wheel ``seq`` (one slot for both: equal ticks fire in version order).

    ``where`` is :data:`QUEUED` while it waits for a worker. ``worker`` is the :class:`Worker`
    running its handler, ``interrupt`` why the attempt was asked to stop, ``packed`` the msgpack
    bytes of a recovered payload not decoded yet.
    """

    __slots__ = (
        "attempts",
        "due",
        "first_attempt_at",
        "handler",
        "interrupt",
        "key",
        "last_error",
        "packed",
        "payload",
        "state",
        "updated_at",
        "worker",
    )

    def __init__(
        self,
        key: str,
        version: int,
        handler: str,
        due: float,
        payload: Any,
        state: TimerState = TimerState.PENDING,
        attempts: int = 0,
        last_error: str | None = None,
        first_attempt_at: float | None = None,
        updated_at: float = 0.0,
    ) -> None:
        self.tick = 0  # the wheel fields (see WheelEntry); tick is set when it goes in
        self.seq = version  # what ``version`` reads
        self.where = DETACHED
        self.slot = 0
        self.pos = 0
        self.key = key
        self.handler = handler
        self.due = due
        self.payload = payload
        self.state = state
        self.attempts = attempts
        self.last_error = last_error
        self.first_attempt_at = first_attempt_at
        self.updated_at = updated_at
        self.worker: Worker | None = None
        self.interrupt: str | None = None
        self.packed: bytes | None = None

    @property
    def version(self) -> int:
        """This version's number, stored as the wheel entry's ``seq``."""
        return self.seq

    @version.setter
    def version(self, version: int) -> None:
        self.seq = version

    @property
    def item(self) -> Timer:
        """The wheel hands out ``entry.item``: for a timer that is the timer itself. A property,
        not a stored self-reference, so a finished timer is freed by reference counting instead
        of waiting for the cyclic collector."""
        return self

    def __repr__(self) -> str:
        # WheelEntry's repr prints its item, which for a timer is the timer itself.
        return f"<Timer {self.key!r} v{self.version} {self.state.value} due {self.due!r}>"

    def charge(self, now: float) -> None:
        """Taken into a start group: out of the queue and RUNNING, one attempt more (its
        record is committed next, or at once where the sink keeps none)."""
        self.interrupt = None  # INTERRUPT_CRASH has done its work
        self.where = DETACHED
        self.state = _RUNNING
        self.attempts += 1
        if self.first_attempt_at is None:
            self.first_attempt_at = now
        self.updated_at = now

    def decode_payload(self) -> Any:
        """The payload, decoding the recovered msgpack bytes once."""
        if self.payload is UNDECODED:
            self.payload = decode_payload(self.packed)
            self.packed = None
        return self.payload

    def info(self) -> TimerInfo:
        # tuple.__new__ skips NamedTuple's Python-level __new__ (a Python call per info).
        return _new_tuple(
            _TIMER_INFO,
            (
                self.key,
                self.version,
                self.handler,
                self.due,
                self.payload if self.payload is not UNDECODED else self.decode_payload(),
                self.state,
                self.attempts,
                self.last_error,
            ),
        )


def ticked(timer: Timer, tick: float) -> Timer:
    """``timer`` with its wheel tick set for an insert into the wheel: its due rounded up to a
    tick, so the tick never starts before the due. Every insert sets it so (``TimerTable.insert``,
    the schedule paths that insert themselves, a batch's ``TimingWheel.insert_entries``,
    restore)."""
    timer.tick = math.ceil(timer.due / tick)
    return timer


def recovered_timer(
    key: str,
    version: int,
    handler: str,
    due: float,
    packed: bytes | None,
    state: TimerState,
    attempts: int,
    last_error: str | None,
    first_attempt_at: float | None,
    updated_at: float,
) -> Timer:
    """A timer as recovery reads it from the journal (a ``journal.state.RowFactory``): the
    journal builds the engine's timers directly, so recovery makes one object per timer. The
    payload's msgpack bytes stay undecoded in ``packed`` until first used: most recovered
    timers are only ever fired."""
    timer = Timer(
        key,
        version,
        handler,
        due,
        UNDECODED if packed is not None else None,
        state,
        attempts,
        last_error,
        first_attempt_at,
        updated_at,
    )
    timer.packed = packed
    return timer
