"""The timer states and the fold: what each record does to a timer's row.

This module is the single source of truth for both. :data:`FOLD` holds one small rule per
record kind; :func:`apply` (the reference fold over records), recovery's loops and compaction's
plan all run those same rules, so ``recover(snapshot + tail) == recover(every record ever
written)`` holds by construction, not by keeping two copies in step.

A rule takes the record's fields as a tuple, exactly as a record (a ``NamedTuple``) or a decoded
body (a tuple from msgpack) holds them, checks their shape and folds them in. A body of the
wrong shape raises :class:`Malformed` (or the ``ValueError`` of a failed unpacking): a damaged
body never becomes a wrong timer.
"""

from __future__ import annotations

import enum
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Protocol, TypeVar

from journal.records import KIND_OF, Kind, Record

__all__ = [
    "CANCELED",
    "DEAD",
    "FINISHED",
    "FOLD",
    "PENDING",
    "RUNNING",
    "STATES",
    "STATE_CODE",
    "SUCCEEDED",
    "FoldRule",
    "Malformed",
    "Row",
    "RowFactory",
    "TimerRow",
    "TimerState",
    "apply",
]


class TimerState(enum.StrEnum):
    """Where a timer is in its life. The journal stores each state as its code in
    :data:`STATES`; the string values are what users, the CLI and JSON output see."""

    PENDING = "PENDING"  #: waiting for its due time (or for its handler to be registered)
    RUNNING = "RUNNING"  #: its handler is running now
    SUCCEEDED = "SUCCEEDED"  #: a handler returned normally: acknowledged, never fires again
    CANCELED = "CANCELED"  #: cancelled before it ran: never fires
    DEAD = "DEAD"  #: attempts or the retry deadline ran out, or PermanentError: see redrive()

    @property
    def is_live(self) -> bool:
        """PENDING or RUNNING: the timer may still fire."""
        return self is TimerState.PENDING or self is TimerState.RUNNING


PENDING: Final = TimerState.PENDING
RUNNING: Final = TimerState.RUNNING
SUCCEEDED: Final = TimerState.SUCCEEDED
CANCELED: Final = TimerState.CANCELED
DEAD: Final = TimerState.DEAD

#: Every state, indexed by its stored code (the ``snapshot.state`` column). Never renumber.
STATES: Final[tuple[TimerState, ...]] = (PENDING, RUNNING, SUCCEEDED, CANCELED, DEAD)
STATE_CODE: Final[dict[str, int]] = {name: code for code, name in enumerate(STATES)}
#: States that compaction may drop after the retention period. DEAD is kept until redriven.
FINISHED: Final[frozenset[TimerState]] = frozenset({SUCCEEDED, CANCELED})


@dataclass(slots=True)
class TimerRow:
    """One timer's current version, as far as the journal knows."""

    key: str
    version: int
    handler: str
    due: float
    payload: bytes | None
    state: TimerState
    attempts: int
    last_error: str | None
    first_attempt_at: float | None  #: wall time of attempt 1 of this version (retry deadline)
    updated_at: float  #: ``at`` of the last record applied


class Row(Protocol):
    """What the fold reads and writes of a timer's row: a :class:`TimerRow`, or any object with
    these attributes that a :data:`RowFactory` makes (the engine's own timer, so that recovery
    builds each timer once instead of a row and then a timer)."""

    key: str
    version: int
    handler: str
    due: float
    state: TimerState
    attempts: int
    last_error: str | None
    first_attempt_at: float | None
    updated_at: float


RowT = TypeVar("RowT", bound=Row)

#: ``make(key, version, handler, due, payload, state, attempts, last_error, first_attempt_at,
#: updated_at)``: a new row, in :class:`TimerRow`'s field order. ``payload`` is the stored
#: msgpack bytes (or None); the row may keep them undecoded.
RowFactory = Callable[
    [str, int, str, float, bytes | None, TimerState, int, str | None, float | None, float], RowT
]


class Malformed(ValueError):
    """A record's fields do not have the shape of its kind."""


#: ``rule(timers, fields, make) -> the highest version the record names``; folds in place.
#: ``make`` builds the row a schedule adds (:data:`RowFactory`); the other rules only change
#: rows. ``timers`` holds rows that ``make`` built.
FoldRule = Callable[[dict[str, Any], Any, RowFactory[Any]], int]

_NUM: Final = (float, int)  # a time or due: ``int`` is accepted, ``bool`` is not
_intern = sys.intern  # one str object per handler name, not one per timer


def _schedule(timers: dict[str, Any], f: Any, make: RowFactory[Any] = TimerRow) -> int:
    """A new PENDING row replacing the key's row, unless that row has a higher version."""
    key, version, handler, due, payload, at = f
    if (
        type(key) is not str
        or type(version) is not int
        or type(handler) is not str
        or type(due) not in _NUM
        or (payload is not None and type(payload) is not bytes)
        or type(at) not in _NUM
    ):
        raise Malformed
    row = make(key, version, _intern(handler), due, payload, PENDING, 0, None, None, at)
    old = timers.setdefault(key, row)  # one probe of the index for a new key, the common case
    if old is not row and old.version <= version:
        timers[key] = row
    return version


def _cancel(timers: dict[str, Any], f: Any, make: RowFactory[Any] = TimerRow) -> int:
    """The live version -> CANCELED."""
    key, version, at = f
    if type(key) is not str or type(version) is not int or type(at) not in _NUM:
        raise Malformed
    row = timers.get(key)
    if row is not None and row.version == version:
        row.state = CANCELED
        row.updated_at = at
    return version


def _attempt(timers: dict[str, Any], f: Any, make: RowFactory[Any] = TimerRow) -> int:
    """The live version -> RUNNING as attempt ``attempt``; attempt 1 starts the retry clock."""
    key, version, attempt, at = f
    if (
        type(key) is not str
        or type(version) is not int
        or type(attempt) is not int
        or type(at) not in _NUM
    ):
        raise Malformed
    row = timers.get(key)
    if row is not None and row.version == version:
        row.state = RUNNING
        row.attempts = attempt
        if attempt == 1:
            row.first_attempt_at = at
        row.updated_at = at
    return version


def _ack(timers: dict[str, Any], f: Any, make: RowFactory[Any] = TimerRow) -> int:
    """The live version -> SUCCEEDED."""
    key, version, at = f
    if type(key) is not str or type(version) is not int or type(at) not in _NUM:
        raise Malformed
    row = timers.get(key)
    if row is not None and row.version == version:
        row.state = SUCCEEDED
        row.updated_at = at
    return version


def _retry(timers: dict[str, Any], f: Any, make: RowFactory[Any] = TimerRow) -> int:
    """The live version -> PENDING again, at the retry's due, remembering the error."""
    key, version, attempt, error, due, at = f
    if (
        type(key) is not str
        or type(version) is not int
        or type(attempt) is not int
        or type(error) is not str
        or type(due) not in _NUM
        or type(at) not in _NUM
    ):
        raise Malformed
    row = timers.get(key)
    if row is not None and row.version == version:
        row.state = PENDING
        row.attempts = attempt
        row.last_error = error
        row.due = due
        row.updated_at = at
    return version


def _dead(timers: dict[str, Any], f: Any, make: RowFactory[Any] = TimerRow) -> int:
    """The live version -> DEAD after ``attempt`` attempts."""
    key, version, attempt, error, at = f
    if (
        type(key) is not str
        or type(version) is not int
        or type(attempt) is not int
        or type(error) is not str
        or type(at) not in _NUM
    ):
        raise Malformed
    row = timers.get(key)
    if row is not None and row.version == version:
        row.state = DEAD
        row.attempts = attempt
        row.last_error = error
        row.updated_at = at
    return version


def _redrive(timers: dict[str, Any], f: Any, make: RowFactory[Any] = TimerRow) -> int:
    """The live (DEAD) version -> PENDING as ``new_version``, attempts 0, at ``due``."""
    key, version, new_version, due, at = f
    if (
        type(key) is not str
        or type(version) is not int
        or type(new_version) is not int
        or type(due) not in _NUM
        or type(at) not in _NUM
    ):
        raise Malformed
    row = timers.get(key)
    if row is not None and row.version == version:
        row.version = new_version
        row.state = PENDING
        row.due = due
        row.attempts = 0
        row.first_attempt_at = None
        row.updated_at = at
    return new_version if new_version > version else version


#: The fold rules, by stored kind (an ``int``, as the ``kind`` column and a body hold it).
#: Every rule ignores a record that is not for the key's current version (a stale record).
FOLD: Final[dict[int, FoldRule]] = {
    int(Kind.SCHEDULE): _schedule,
    int(Kind.CANCEL): _cancel,
    int(Kind.ATTEMPT): _attempt,
    int(Kind.ACK): _ack,
    int(Kind.RETRY): _retry,
    int(Kind.DEAD): _dead,
    int(Kind.REDRIVE): _redrive,
}
_RULE_OF: Final[dict[type[Record], FoldRule]] = {
    cls: FOLD[int(kind)] for cls, kind in KIND_OF.items()
}


def apply(timers: dict[str, TimerRow], record: Record) -> int:
    """Fold one record into ``timers`` (in place) by its rule in :data:`FOLD`; returns the
    highest version it names. Stale records are ignored and never raise; a record of the
    wrong shape raises :class:`Malformed` (``TypeError`` if it is not a record at all).

    - ``Schedule``: a new PENDING row that replaces the key's row, unless that row has a higher
      version (then the schedule is stale and ignored).
    - Every other kind applies only when its ``version`` is the row's version.
    - ``Attempt`` -> RUNNING; ``Ack`` -> SUCCEEDED; ``Cancel`` -> CANCELED; ``Retry`` -> PENDING
      at the new due; ``Dead`` -> DEAD; ``Redrive`` -> PENDING as ``new_version``, attempts 0.

    RUNNING is kept as it is here; :meth:`journal.Journal.recover` turns it into PENDING.
    """
    rule = _RULE_OF.get(type(record))
    if rule is None:
        raise TypeError(f"not a journal record: {type(record).__name__}")
    return rule(timers, record, TimerRow)
