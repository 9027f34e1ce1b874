"""The engine's record of one timer: one mutable object per key, shared by every index."""

from __future__ import annotations

import asyncio
import math
from typing import Any, Final

from wheel_engine.errors import IllegalTransition
from wheel_engine.model import Firing, TimerInfo, TimerState
from wheel_engine.payload import decode_payload
from wheel_engine.wheel.entry import DETACHED, WheelEntry

#: ``Timer.payload`` of a recovered timer whose msgpack bytes (``Timer.packed``) are not decoded
#: yet: recovery decodes nothing, the first firing or ``get()`` does.
UNDECODED: Final[Any] = object()

_new_tuple: Final = tuple.__new__
_TIMER_INFO: Final = TimerInfo  # Final: a C static in compiled code, not a module lookup
# Final: compiled, each guard below is a pointer comparison with a C static.
_PENDING: Final = TimerState.PENDING
_RUNNING: Final = TimerState.RUNNING
_SUCCEEDED: Final = TimerState.SUCCEEDED
_CANCELED: Final = TimerState.CANCELED
_DEAD: Final = TimerState.DEAD

# Why a running handler is being interrupted (``Timer.interrupt``).
INTERRUPT_CANCEL = "cancel"  #: engine.cancel() asked for it
INTERRUPT_TIMEOUT = "timeout"  #: the handler ran past its timeout
#: (on a PENDING timer, set at recovery) its last attempt was cut short by a crash
INTERRUPT_CRASH = "crash"

#: ``Timer.where`` of a due timer waiting in the starter's queue (``wheel_engine.starting``):
#: out of the wheel (whose own values are all >= -3), PENDING, and not charged an attempt.
QUEUED: Final = -4
#: ``Timer.where`` of a voided timer (:meth:`Timer.void`): CANCELED for good, out of every index.
#: A ``where`` and not a state of its own, since readers see it CANCELED like any cancelled one.
VOIDED: Final = -5


class Worker:
    """One worker task and the firing it is running: what a cancel or a timeout reaches.

    One per worker task (not per firing); ``Timer.worker`` points at it while its handler runs.
    """

    __slots__ = ("firing", "task")

    def __init__(self, task: asyncio.Task[Any]) -> None:
        self.task = task
        self.firing: Firing | None = None


class TimerExtras:
    """The fields of a :class:`Timer` that most timers never set, out of line: a pending timer
    pays one slot (``Timer.extras``, None) for all of them instead of one each. A timer gets
    its own only when one of them is set to something (a trace, an error text, with a recovered
    payload's bytes if it has them).

    ``Timer.extras`` alone holds a recovered payload's msgpack bytes while nothing else is set:
    recovery makes one object per timer, not two. Not here: ``Timer.interrupt`` and
    ``Timer.worker``, read or set on every firing, where a property would cost a Python call
    each time in the pure build (and the worker a side object per attempt)."""

    __slots__ = ("last_error", "packed", "trace")

    def __init__(self, packed: bytes | None) -> None:
        self.packed = packed
        self.trace: str | None = None  # tracing (#29): see wheel_engine.tracing
        self.last_error: str | None = None


class Timer(WheelEntry["Timer"]):
    """One version of one key, and its own wheel entry (``item`` is the timer itself), so a
    pending timer costs one object. ``where != DETACHED`` while it waits in the wheel; its
    ``version`` is its wheel ``seq`` (one slot for both: equal ticks fire in version order).

    ``where`` is :data:`QUEUED` while it waits for a worker, :data:`VOIDED` once voided.
    ``worker`` is the :class:`Worker` running its handler, ``interrupt`` why the attempt was
    asked to stop, ``packed`` the msgpack bytes of a recovered payload not decoded yet.
    ``packed``, ``trace`` and ``last_error`` are None for most timers and live in
    :class:`TimerExtras` (read and set as attributes here).

    **The state word.** ``state`` is the one word telling where the timer is in its life, and
    each change of it is one method below, which checks the state it starts from (one or two
    identity tests) and raises :class:`~wheel_engine.errors.IllegalTransition`, changing
    nothing, from any other. Rows (state in, transition across, state out; ``-`` raises)::

        from       charge   uncharge retry    succeed    cancel    kill   void      uncancel
        PENDING    RUNNING  -        -        -          CANCELED  DEAD   CANCELED  -
        RUNNING    -        PENDING  PENDING  SUCCEEDED  CANCELED  DEAD   CANCELED  -
        SUCCEEDED  -        -        -        -          -         -      CANCELED  -
        CANCELED   -        -        -        -          -         -      CANCELED  PENDING*
        DEAD       -        -        -        -          -         -      CANCELED  -

    Why each guard:

    - ``charge`` only from PENDING: a RUNNING version charged again would run twice at once,
      and a finished one must never fire again.
    - ``uncharge`` and ``retry`` only from RUNNING: only a charged attempt can be handed back;
      uncharging any other would count fewer attempts than the journal holds.
    - ``succeed`` only from RUNNING: only an attempt that ran can have returned.
    - ``cancel`` and ``kill`` only from a live state: an end is final (a cancel of a finished
      timer is ``ALREADY_DONE``; a DEAD one waits for ``redrive``, which makes a new version).
      PENDING -> DEAD is a recovered timer whose last allowed attempt a crash cut short.
    - ``void`` from any state: the version's schedule never became durable, so whatever it
      did in memory meanwhile did not happen; it must not fire. It is final: ``where`` becomes
      :data:`VOIDED`, and no transition leaves it.
    - ``uncancel`` only from CANCELED, and (*) not from a voided one: it undoes a cancel whose
      commit failed, nothing else. A cancel submitted while the version's own schedule was
      committing fails with it, after the schedule's failure voided the version; undoing that
      cancel must not bring back a timer that never existed durably.

    Not transitions: building a timer in a state (recovery's rows, a database row adopted), and
    the journal's fold (``journal.rules``), which replays the records' own state machine on the
    rows recovery builds, before the engine holds them.
    """

    __slots__ = (
        "attempts",
        "due",
        "extras",  # None, a recovered payload's bytes alone, or TimerExtras
        "first_attempt_at",
        "handler",
        "interrupt",
        "key_base",  # the key, or (``serial`` set) the engine's key prefix, shared
        "payload",
        "serial",  # 0, or the serial of the key the engine made: "<key_base>-<serial>"
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
        serial: int = 0,
    ) -> None:
        self.tick = 0  # the wheel fields (see WheelEntry); tick is set when it goes in
        self.seq = version  # what ``version`` reads
        self.where = DETACHED
        self.pos = 0
        self.key_base = key
        self.serial = serial
        self.handler = handler
        self.due = due
        self.payload = payload
        self.state = state
        self.attempts = attempts
        self.first_attempt_at = first_attempt_at
        self.updated_at = updated_at
        self.worker: Worker | None = None
        self.interrupt: str | None = None
        self.extras: bytes | TimerExtras | None = None
        if last_error is not None:
            self.last_error = last_error

    @property
    def key(self) -> str:
        """Its key. One the engine made is spelled when asked, not stored: it costs the timer
        its serial alone (``wheel_engine.key_index``)."""
        return self.key_base if not self.serial else f"{self.key_base}-{self.serial}"

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

    # ------------------------------------------------------------------ the extras
    def _own_extras(self) -> TimerExtras:
        """This timer's :class:`TimerExtras`, made when a first one of its fields is set."""
        extras = self.extras
        if isinstance(extras, TimerExtras):
            return extras
        made = TimerExtras(extras)  # extras is None, or a recovered payload's bytes
        self.extras = made
        return made

    @property
    def packed(self) -> bytes | None:
        """The msgpack bytes of a recovered payload not decoded yet (``payload`` is
        :data:`UNDECODED`), else None."""
        extras = self.extras
        return extras.packed if isinstance(extras, TimerExtras) else extras

    @packed.setter
    def packed(self, packed: bytes | None) -> None:
        extras = self.extras
        if isinstance(extras, TimerExtras):
            extras.packed = packed
        else:
            self.extras = packed

    @property
    def trace(self) -> str | None:
        """tracing (#29): the W3C context it was scheduled in, or None."""
        extras = self.extras
        return None if extras is None or isinstance(extras, bytes) else extras.trace

    @trace.setter
    def trace(self, trace: str | None) -> None:
        if trace is not None or isinstance(self.extras, TimerExtras):
            self._own_extras().trace = trace

    @property
    def last_error(self) -> str | None:
        """The bounded text of its last failed attempt (``wheel_engine.diagnostics``), or None."""
        extras = self.extras
        return None if extras is None or isinstance(extras, bytes) else extras.last_error

    @last_error.setter
    def last_error(self, last_error: str | None) -> None:
        if last_error is not None or isinstance(self.extras, TimerExtras):
            self._own_extras().last_error = last_error

    def __repr__(self) -> str:
        # WheelEntry's repr prints its item, which for a timer is the timer itself.
        return f"<Timer {self.key!r} v{self.version} {self.state.value} due {self.due!r}>"

    # ------------------------------------------------------------------ transitions
    def charge(self, now: float) -> None:
        """PENDING -> RUNNING, one attempt more: taken into a start group, out of the queue
        (its record is committed next, or at once where the sink keeps none)."""
        if self.state is not _PENDING:
            raise _illegal(self, "charge", "PENDING")
        self.interrupt = None  # INTERRUPT_CRASH has done its work
        self.where = DETACHED
        self.state = _RUNNING
        self.attempts += 1
        if self.first_attempt_at is None:
            self.first_attempt_at = now
        self.updated_at = now

    def uncharge(self) -> None:
        """RUNNING -> PENDING, one attempt less: a charged attempt that will not run (its
        commit failed, or the store did not claim it). The caller places it again. Back at no
        attempt, the retry clock is unset too, as the journal has it: the total deadline
        counts from the first attempt that was committed, on every backend."""
        if self.state is not _RUNNING:
            raise _illegal(self, "uncharge", "RUNNING")
        self.state = _PENDING
        self.attempts -= 1
        if self.attempts == 0:
            self.first_attempt_at = None

    def retry(self, due: float, now: float) -> None:
        """RUNNING -> PENDING at ``due``: the attempt failed and another is allowed. The
        caller places it again."""
        if self.state is not _RUNNING:
            raise _illegal(self, "retry", "RUNNING")
        self.state = _PENDING
        self.due = due
        self.updated_at = now

    def succeed(self, now: float) -> None:
        """RUNNING -> SUCCEEDED: its handler returned."""
        if self.state is not _RUNNING:
            raise _illegal(self, "succeed", "RUNNING")
        self.state = _SUCCEEDED
        self.updated_at = now

    def cancel(self, now: float) -> None:
        """PENDING or RUNNING -> CANCELED: cancelled before it ran, or its attempt stopped as
        asked. The caller has taken a pending one out of the wheel."""
        state = self.state
        if state is not _PENDING and state is not _RUNNING:
            raise _illegal(self, "cancel", "PENDING, RUNNING")
        self.state = _CANCELED
        self.updated_at = now

    def kill(self, now: float) -> None:
        """PENDING or RUNNING -> DEAD: no attempt more (see ``redrive``)."""
        state = self.state
        if state is not _PENDING and state is not _RUNNING:
            raise _illegal(self, "kill", "PENDING, RUNNING")
        self.state = _DEAD
        self.updated_at = now

    def void(self) -> None:
        """Any state -> CANCELED for good (:data:`VOIDED`): this version's schedule commit
        failed, so it never existed durably and must not fire. The caller has taken a pending
        one out of the wheel."""
        self.state = _CANCELED
        self.where = VOIDED

    @property
    def voided(self) -> bool:
        return self.where == VOIDED

    @property
    def may_uncancel(self) -> bool:
        """Whether :meth:`uncancel` is legal: CANCELED, and not voided (a voided version never
        existed durably, so a failed cancel has nothing to bring back)."""
        return self.state is _CANCELED and self.where != VOIDED

    def uncancel(self) -> None:
        """CANCELED -> PENDING: the cancel's commit failed. The caller places it again."""
        if not self.may_uncancel:
            raise _illegal(self, "uncancel", "CANCELED, not voided")
        self.state = _PENDING

    def decode_payload(self) -> Any:
        """The payload, decoding the recovered msgpack bytes once."""
        if self.payload is UNDECODED:
            extras = self.extras  # not through .packed: a property is a Python call, pure
            if isinstance(extras, TimerExtras):
                self.payload = decode_payload(extras.packed)
                extras.packed = None
            else:
                self.payload = decode_payload(extras)
                self.extras = None
        return self.payload

    def info(self) -> TimerInfo:
        extras = self.extras
        # tuple.__new__ skips NamedTuple's Python-level __new__ (a Python call per info).
        return _new_tuple(
            _TIMER_INFO,
            (
                self.key_base if not self.serial else f"{self.key_base}-{self.serial}",  # .key
                self.version,
                self.handler,
                self.due,
                self.payload if self.payload is not UNDECODED else self.decode_payload(),
                self.state,
                self.attempts,
                None if extras is None or isinstance(extras, bytes) else extras.last_error,
            ),
        )


def _illegal(timer: Timer, transition: str, legal: str) -> IllegalTransition:
    """The error of an illegal transition (the guards' cold path, out of their bodies)."""
    return IllegalTransition(timer.key, timer.version, transition, timer.state.value, legal)


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
    if packed is not None:
        if timer.extras is None:  # no error text: the bytes alone, no property call
            timer.extras = packed
        else:
            timer.packed = packed
    return timer
