"""A timer's row as the PostgreSQL journal stores it, and its conversion to a ``TimerRow``.

The loader, the change feed and ``lookup`` all select :data:`COLUMNS` and build a
:class:`StoredTimer` from the result, so there is one row shape to keep in step with the schema;
every new row is written by :data:`INSERT_PENDING` (a schedule's, a claim's successor's).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, NamedTuple

from journal.postgres.states import PENDING_CODE
from journal.state import STATES, TimerRow, TimerState

__all__ = ["COLUMNS", "INSERT_PENDING", "StoredTimer", "arrays", "stored"]

#: The columns every reader selects, in :class:`StoredTimer` field order (prefix ``t.``).
COLUMNS: Final = (
    "t.key, t.version, t.handler, t.due, t.payload, t.state, t.attempts, t.last_error,"
    " t.first_attempt_at, t.updated_at, t.partition, t.run_epoch, t.cancel_requested,"
    " t.change_seq, t.trace"
)

#: New PENDING rows, a fresh version each, from arrays ``keys``, ``parts``, ``handlers``,
#: ``dues``, ``payloads``, ``traces``; the caller's ``ON CONFLICT`` clause follows.
INSERT_PENDING: Final = (
    "INSERT INTO wheel_timers AS t"
    " (key, partition, version, handler, due, payload, trace, state)"
    " SELECT r.key, r.partition, nextval('wheel_version_seq'), r.handler, r.due, r.payload,"
    f" r.trace, {PENDING_CODE}"
    " FROM unnest(%(keys)s::text[], %(parts)s::int[], %(handlers)s::text[],"
    "   %(dues)s::float8[], %(payloads)s::bytea[], %(traces)s::text[])"
    "   AS r(key, partition, handler, due, payload, trace)"
)


class StoredTimer(NamedTuple):
    """One timer as stored. ``state`` is the state's name (``journal.state.STATES``)."""

    key: str
    version: int
    handler: str
    due: float
    payload: bytes | None  #: msgpack bytes, exactly as scheduled
    state: TimerState
    attempts: int
    last_error: str | None
    first_attempt_at: float | None
    updated_at: float  #: the database's clock at the last change
    partition: int
    run_epoch: int | None  #: the owner's epoch of the last attempt (None: never ran)
    cancel_requested: bool  #: a cancel reached it while RUNNING: its owner should stop it
    change_seq: int  #: the order of the last change among all changes
    trace: str | None = None  #: the W3C trace context it was scheduled in (tracing, #29)

    def row(self) -> TimerRow:
        """The journal-neutral view the engine uses for ``get()`` and recovery."""
        return TimerRow(
            self.key,
            self.version,
            self.handler,
            self.due,
            self.payload,
            self.state,
            self.attempts,
            self.last_error,
            self.first_attempt_at,
            self.updated_at,
            self.trace,
        )


def stored(row: Any) -> StoredTimer:
    """A :data:`COLUMNS` result row as a :class:`StoredTimer` (bytea arrives as bytes)."""
    payload = row[4]
    return StoredTimer(
        row[0],
        row[1],
        row[2],
        row[3],
        None if payload is None else bytes(payload),
        STATES[row[5]],
        row[6],
        row[7],
        row[8],
        row[9],
        row[10],
        row[11],
        row[12],
        row[13],
        row[14],
    )


def arrays(rows: Sequence[Sequence[Any]], names: Sequence[str], **scalars: Any) -> dict[str, Any]:
    """Parameters for ``unnest(%(name)s, ...)``: column ``i`` of ``rows`` as a list named
    ``names[i]``, plus ``scalars``. A batch goes to the server as one array per column."""
    columns: list[list[Any]] = [[] for _ in names]
    for row in rows:
        for column, value in zip(columns, row, strict=True):
            column.append(value)
    return {**dict(zip(names, columns, strict=True)), **scalars}
