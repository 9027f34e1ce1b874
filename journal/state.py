"""The timer states and a timer's row: what the fold (:mod:`journal.rules`) reads and writes.

This module is the single source of truth for the states (:class:`TimerState`, their stored
codes in :data:`STATES`) and for the row (:class:`TimerRow`, the :class:`Row` protocol and the
:data:`RowFactory` a caller gives recovery to build its own rows). It stays interpreted: a
compiled ``TimerRow`` would check its field types on every assignment, which callers that build
rows by hand (tests, migrations) do not expect; the rules, the hot part, are compiled.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Protocol, TypeVar

from journal.errors import WheelEngineError

__all__ = [
    "CANCELED",
    "DEAD",
    "FINISHED",
    "PENDING",
    "RUNNING",
    "STATES",
    "STATE_CODE",
    "SUCCEEDED",
    "Malformed",
    "Row",
    "RowFactory",
    "TimerRow",
    "TimerState",
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
    trace: str | None = None  #: the W3C trace context it was scheduled in (or redriven), if any


class Row(Protocol):
    """What the fold reads and writes of a timer's row: a :class:`TimerRow`, or any object with
    these attributes that a :data:`RowFactory` makes (the engine's own timer, so that recovery
    builds each timer once instead of a row and then a timer)."""

    @property
    def key(self) -> str: ...  # read only: the engine's timer may spell it when asked

    version: int
    handler: str
    due: float
    state: TimerState
    attempts: int
    last_error: str | None
    first_attempt_at: float | None
    updated_at: float
    trace: str | None  #: set by the fold after ``make`` when a record carries one


RowT = TypeVar("RowT", bound=Row)

#: ``make(key, version, handler, due, payload, state, attempts, last_error, first_attempt_at,
#: updated_at)``: a new row, in :class:`TimerRow`'s field order. ``payload`` is the stored
#: msgpack bytes (or None); the row may keep them undecoded.
RowFactory = Callable[
    [str, int, str, float, bytes | None, TimerState, int, str | None, float | None, float], RowT
]


class Malformed(WheelEngineError, ValueError):
    """A record's fields do not have the shape of its kind."""
