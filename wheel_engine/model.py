"""The values users see: timer states, cancel results, timer snapshots and firings."""

from __future__ import annotations

import enum
from typing import Any, NamedTuple

# The one definition of the states lives in the journal (which must not import wheel_engine):
# the journal stores them, the engine, the model and the CLI use the same enum.
from journal.state import TimerState

__all__ = ["CancelResult", "Firing", "ProvisionalTimerInfo", "TimerInfo", "TimerState"]


class CancelResult(enum.StrEnum):
    """What ``Engine.cancel`` did. Each value says exactly what happened."""

    CANCELED = "CANCELED"  #: it was pending; the cancel is committed and it will never fire
    CANCEL_REQUESTED = "CANCEL_REQUESTED"  #: its handler is running and was sent CancelledError
    ALREADY_DONE = "ALREADY_DONE"  #: it had already succeeded, been cancelled or died
    NOT_FOUND = "NOT_FOUND"  #: no such key, or not the live version (a stale cancel)


class TimerInfo(NamedTuple):
    """A snapshot of one timer, as ``schedule`` and ``get`` return it. It does not update.

    :attr:`committed` is False for what ``schedule(..., connection=conn)`` returns: the timer
    as it will be if the caller's transaction commits (a :class:`ProvisionalTimerInfo`)."""

    key: str
    version: int
    handler: str
    due: float  #: epoch seconds (wall clock)
    payload: Any
    state: TimerState
    attempts: int
    last_error: str | None

    @property
    def committed(self) -> bool:
        """True: the timer is committed as shown. False: only once the caller's transaction
        commits (on rollback it never existed)."""
        return True


class ProvisionalTimerInfo(TimerInfo):
    """A :class:`TimerInfo` written in a caller's transaction and not committed yet (its
    fields are what the commit makes true; it compares equal to the committed snapshot)."""

    __slots__ = ()

    @property
    def committed(self) -> bool:
        return False


class _FiringFields(NamedTuple):
    key: str
    version: int
    handler: str
    payload: Any
    due: float  #: epoch seconds it was due (for a retry, the retry's due time)
    attempt: int  #: 1 for the first attempt
    fired_at: float  #: epoch seconds the attempt started


class Firing(_FiringFields):
    """What a handler receives for one attempt: a named tuple of ``key, version, handler,
    payload, due`` (epoch seconds it was due; for a retry, the retry's due time), ``attempt``
    (1 for the first) and ``fired_at`` (epoch seconds the attempt started).

    ``idempotency_key`` is ``"<key>#<version>"``: the same for every attempt of this version,
    before and after a crash, so a handler can make its effect happen once.

    ``cancel_requested`` turns true (and stays true) once a cancel, a timeout or shutdown asks
    this attempt to stop; it is safe to read from any thread, so plain and ``thread=True``
    handlers, which cannot be interrupted, can stop at their own checkpoints.
    """

    # No __slots__: a tuple subclass cannot have any, so instances get a __dict__, created only
    # when an attempt is asked to stop; every other firing reads this class-level False.
    _stop_requested: bool = False

    @property
    def idempotency_key(self) -> str:
        return f"{self.key}#{self.version}"

    @property
    def cancel_requested(self) -> bool:
        return self._stop_requested

    def _request_stop(self) -> None:
        """Called by the engine on its loop; one attribute store, atomic under the GIL."""
        self._stop_requested = True
