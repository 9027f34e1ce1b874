"""The journal's record kinds: one per state change of a timer.

A record is a small named tuple. ``journal.codec`` turns it into a row ``(kind, body)`` where
``body`` is msgpack; nothing here knows about wheels, handlers or asyncio.

Every record carries ``at``: the wall time (epoch seconds) it was made, which recovery uses for
retention and the CLI shows in a timer's history.
"""

from __future__ import annotations

import enum
from typing import NamedTuple


class Kind(enum.IntEnum):
    """Stored in the ``kind`` column. Never renumber: old journals must keep decoding."""

    SCHEDULE = 1
    CANCEL = 2
    ATTEMPT = 3
    ACK = 4
    RETRY = 5
    DEAD = 6
    REDRIVE = 7


class Schedule(NamedTuple):
    """A timer (re)scheduled: a new ``version`` of ``key`` that replaces any older version."""

    key: str
    version: int
    handler: str
    due: float
    payload: bytes | None  #: msgpack bytes, or None for no payload
    at: float
    #: The W3C trace context of the request that scheduled it (traceparent, then a space and
    #: the tracestate when there is one), or None. An optional trailing field: a record
    #: without one is stored as the six fields alone, as before tracing existed.
    trace: str | None = None


class Cancel(NamedTuple):
    """``version`` of ``key`` was cancelled before it ran. Ignored if that is not the live one."""

    key: str
    version: int
    at: float


class Attempt(NamedTuple):
    """Attempt number ``attempt`` (1-based) is about to run. Committed before the handler runs."""

    key: str
    version: int
    attempt: int
    at: float


class Ack(NamedTuple):
    """A handler returned normally: the timer succeeded."""

    key: str
    version: int
    at: float


class Retry(NamedTuple):
    """Attempt ``attempt`` failed with ``error``; the next attempt is due at ``due``."""

    key: str
    version: int
    attempt: int
    error: str
    due: float
    at: float


class Dead(NamedTuple):
    """The timer gave up (attempts, deadline or a permanent error) after ``attempt`` attempts."""

    key: str
    version: int
    attempt: int
    error: str
    at: float


class Redrive(NamedTuple):
    """A DEAD ``version`` goes back to PENDING as ``new_version``, due at ``due``, attempts 0."""

    key: str
    version: int
    new_version: int
    due: float
    at: float
    #: The trace context of the redrive's caller, or None (optional and trailing, as Schedule's)
    trace: str | None = None


Record = Schedule | Cancel | Attempt | Ack | Retry | Dead | Redrive

KIND_OF: dict[type[Record], Kind] = {
    Schedule: Kind.SCHEDULE,
    Cancel: Kind.CANCEL,
    Attempt: Kind.ATTEMPT,
    Ack: Kind.ACK,
    Retry: Kind.RETRY,
    Dead: Kind.DEAD,
    Redrive: Kind.REDRIVE,
}
TYPE_OF: dict[Kind, type[Record]] = {kind: cls for cls, kind in KIND_OF.items()}
