"""The live state of the timers, folded from records. Used by recovery and compaction.

:func:`apply` is the single source of truth for what a record does to a timer; recovery and
compaction both fold with it (or with :func:`fold_rows`, a faster equivalent over raw rows), so
``recover(snapshot + tail) == recover(every record ever written)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from journal.records import Ack, Attempt, Cancel, Dead, Record, Redrive, Retry, Schedule

__all__ = [
    "CANCELED",
    "DEAD",
    "FINISHED",
    "PENDING",
    "RUNNING",
    "STATES",
    "STATE_CODE",
    "SUCCEEDED",
    "TimerRow",
    "apply",
]

PENDING: Final = "PENDING"
RUNNING: Final = "RUNNING"
SUCCEEDED: Final = "SUCCEEDED"
CANCELED: Final = "CANCELED"
DEAD: Final = "DEAD"

#: Every state, indexed by its stored code (the ``snapshot.state`` column). Never renumber.
STATES: Final[tuple[str, ...]] = (PENDING, RUNNING, SUCCEEDED, CANCELED, DEAD)
STATE_CODE: Final[dict[str, int]] = {name: code for code, name in enumerate(STATES)}
#: States that compaction may drop after the retention period. DEAD is kept until redriven.
FINISHED: Final[frozenset[str]] = frozenset({SUCCEEDED, CANCELED})


@dataclass(slots=True)
class TimerRow:
    """One timer's current version, as far as the journal knows."""

    key: str
    version: int
    handler: str
    due: float
    payload: bytes | None
    state: str  #: "PENDING" | "RUNNING" | "SUCCEEDED" | "CANCELED" | "DEAD"
    attempts: int
    last_error: str | None
    first_attempt_at: float | None  #: wall time of attempt 1 of this version (retry deadline)
    updated_at: float  #: ``at`` of the last record applied


def apply(timers: dict[str, TimerRow], record: Record) -> None:
    """Fold one record into ``timers`` (in place). Stale records are ignored, never raise.

    - ``Schedule``: a new PENDING row that replaces the key's row, unless that row has a higher
      version (then the schedule is stale and ignored).
    - Every other kind applies only when its ``version`` is the row's version.
    - ``Attempt`` -> RUNNING; ``Ack`` -> SUCCEEDED; ``Cancel`` -> CANCELED; ``Retry`` -> PENDING
      at the new due; ``Dead`` -> DEAD; ``Redrive`` -> PENDING as ``new_version``, attempts 0.

    RUNNING is kept as it is here; :meth:`journal.Journal.recover` turns it into PENDING.
    """
    if type(record) is Schedule:
        old = timers.get(record.key)
        if old is not None and old.version > record.version:
            return
        timers[record.key] = TimerRow(
            record.key,
            record.version,
            record.handler,
            record.due,
            record.payload,
            PENDING,
            0,
            None,
            None,
            record.at,
        )
        return
    row = timers.get(record.key)
    if row is None or row.version != record.version:
        return
    if type(record) is Attempt:
        row.state = RUNNING
        row.attempts = record.attempt
        if record.attempt == 1:
            row.first_attempt_at = record.at
    elif type(record) is Ack:
        row.state = SUCCEEDED
    elif type(record) is Cancel:
        row.state = CANCELED
    elif type(record) is Retry:
        row.state = PENDING
        row.due = record.due
        row.last_error = record.error
        row.attempts = record.attempt
    elif type(record) is Dead:
        row.state = DEAD
        row.last_error = record.error
        row.attempts = record.attempt
    elif type(record) is Redrive:
        row.version = record.new_version
        row.state = PENDING
        row.due = record.due
        row.attempts = 0
        row.first_attempt_at = None
    else:  # pragma: no cover - Record is a closed union
        raise TypeError(f"not a journal record: {type(record).__name__}")
    row.updated_at = record.at
