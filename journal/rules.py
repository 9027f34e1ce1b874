"""The fold: what each record does to a timer's row, one small rule per record kind.

This module is the single source of truth for it. :data:`FOLD` holds the rules by stored kind;
:func:`apply` (the reference fold over records), recovery's loops (:mod:`journal.fold`) and
compaction's plan all run those same rules, so ``recover(snapshot + tail) == recover(every
record ever written)`` holds by construction, not by keeping two copies in step.

A rule takes the record's fields as a tuple, exactly as a record (a ``NamedTuple``) or a decoded
body (a tuple from msgpack) holds them, checks their shape and folds them in. A body of the
wrong shape raises :class:`~journal.state.Malformed` (or the ``ValueError``/``TypeError`` of a
failed unpacking): a damaged body never becomes a wrong timer. Compiled
(``wheel_engine/_build.py``): they run once per stored record at every start-up.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, Final

from journal.records import KIND_OF, Kind, Record
from journal.state import (
    CANCELED,
    DEAD,
    PENDING,
    RUNNING,
    SUCCEEDED,
    Malformed,
    RowFactory,
    TimerRow,
)

__all__ = ["FOLD", "FoldRule", "apply", "not_num", "schedule_rule"]

#: ``rule(timers, fields, make) -> the highest version the record names``; folds in place.
#: ``make`` builds the row a schedule adds (:data:`RowFactory`); the other rules only change
#: rows. ``timers`` holds rows that ``make`` built.
FoldRule = Callable[[dict[str, Any], Any, RowFactory[Any]], int]

_intern: Final = sys.intern  # one str object per handler name, not one per timer


def not_num(value: object) -> bool:
    """Not a time or a due (a float or an int; ``bool`` is not one). Two identity tests rather
    than ``type(value) in (float, int)``, which compiled code runs as generic comparisons."""
    kind = type(value)
    return kind is not float and kind is not int


def schedule_rule(timers: dict[str, Any], f: Any, make: RowFactory[Any] = TimerRow) -> int:
    """A new PENDING row replacing the key's row, unless that row has a higher version.

    The common rule (most records are schedules), so the fields are read by index from a
    tuple: compiled, that is a check that ``f`` is a tuple and direct reads, where unpacking
    an untyped value goes through an iterator.
    """
    t: tuple[Any, ...] = f  # a decoded body is a tuple (msgpack, use_list=False) or a record
    n = len(t)
    if n != 6 and n != 7:  # 7: a trace context trails (journal.codec, "optional fields")
        raise Malformed
    key = t[0]
    version = t[1]
    handler = t[2]
    due = t[3]
    payload = t[4]
    at = t[5]
    if (
        type(key) is not str
        or type(version) is not int
        or type(handler) is not str
        or not_num(due)
        or (payload is not None and type(payload) is not bytes)
        or not_num(at)
    ):
        raise Malformed
    row = make(key, version, _intern(handler), due, payload, PENDING, 0, None, None, at)
    if n == 7:
        _set_trace(row, t[6])
    old = timers.setdefault(key, row)  # one probe of the index for a new key, the common case
    if old is not row and old.version <= version:
        timers[key] = row
    return version


def _set_trace(row: Any, trace: Any) -> None:
    """A row's trace context from a record's trailing field (a Schedule's, a Redrive's): a
    ``str``, or None in a record object (encoded, a None is no field at all)."""
    if trace is None:
        return
    if type(trace) is not str:
        raise Malformed
    row.trace = trace


def _cancel(timers: dict[str, Any], f: Any, make: RowFactory[Any] = TimerRow) -> int:
    """The live version -> CANCELED."""
    key, version, at = f
    if type(key) is not str or type(version) is not int or not_num(at):
        raise Malformed
    row = timers.get(key)
    if row is not None and row.version == version:
        row.state = CANCELED
        row.updated_at = at
    return version


def _attempt(timers: dict[str, Any], f: Any, make: RowFactory[Any] = TimerRow) -> int:
    """The live version -> RUNNING as attempt ``attempt``; attempt 1 starts the retry clock."""
    key, version, attempt, at = f
    if type(key) is not str or type(version) is not int or type(attempt) is not int or not_num(at):
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
    if type(key) is not str or type(version) is not int or not_num(at):
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
        or not_num(due)
        or not_num(at)
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
        or not_num(at)
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
    key, version, new_version, due, at, *trace = f  # trace: the optional trailing field
    if len(trace) > 1 or (
        type(key) is not str
        or type(version) is not int
        or type(new_version) is not int
        or not_num(due)
        or not_num(at)
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
        if trace:
            _set_trace(row, trace[0])
    return new_version if new_version > version else version


#: The fold rules, by stored kind (an ``int``, as the ``kind`` column and a body hold it).
#: Every rule ignores a record that is not for the key's current version (a stale record).
FOLD: Final[dict[int, FoldRule]] = {
    int(Kind.SCHEDULE): schedule_rule,
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
