"""The batch folds: check one fetched batch of stored rows and fold it into the timers.

Recovery (:mod:`journal.recovery`) and compaction's plan fetch rows in batches and hand each
batch here: :func:`fold_sealed` for schema-2 records, :func:`fold_records` for schema-1 ones,
:func:`fold_snapshot` for snapshot rows. Each runs the rules of :data:`journal.rules.FOLD`
over every record of the batch, in order, after the batch's checks: one CRC pass over the
whole batch (:func:`journal.checksum.sealed_data`), then per record its sealed seq (its place)
and its sealed kind (against the ``kind`` column). A batch that fails any check is looked at
again row by row by the careful decoders of :mod:`journal.codec`, which raise
:class:`~journal.errors.JournalCorrupt` naming the first damaged row.

These are the hot loops of a start-up (one iteration per stored row), so the module is
compiled (``wheel_engine/_build.py``) and calls the common rule, a new timer's schedule,
directly rather than through the table. Guaranteed, on both builds: the same checks, the same
rows folded in the same order, the same errors.
"""

from __future__ import annotations

from collections.abc import Iterable
from operator import itemgetter
from typing import Any, Final

import msgpack

from journal import codec
from journal.checksum import sealed_data
from journal.errors import JournalCorrupt
from journal.records import Kind
from journal.rules import FOLD, not_num, schedule_rule
from journal.state import STATES, RowFactory, RowT, TimerRow

__all__ = ["fold_records", "fold_sealed", "fold_snapshot"]

_BODY: Final = itemgetter(3)  # a snapshot row's body
_BODY_OF_RECORD: Final = itemgetter(1)  # a ``(kind, body)`` record row's body
_ARRAY_OF: Final = b"\xdd"  # msgpack's header of an array, its length next (4 bytes, big-endian)
_SCHEDULE: Final = int(Kind.SCHEDULE)  # the kind of most records: its rule is called directly


class _Bad(Exception):
    """A row failed a check in a hot loop (then re-diagnosed by the careful decoder)."""


def fold_sealed(
    timers: dict[str, RowT],
    rows: list[tuple[int, bytes]],
    after_seq: int,
    max_version: int,
    make: RowFactory[RowT] = TimerRow,  # type: ignore[assignment]  # RowT is TimerRow then
    kinds: set[int] | None = None,
) -> int:
    """Check and fold stored (schema 2) records: ``(kind, body)`` rows, the records right after
    ``after_seq`` in seq order, rows made by ``make``. Returns the new max version. ``kinds``,
    when given, gets the kind of every record folded other than a schedule (recovery asks
    whether any attempt was: without one, no row can be RUNNING).

    Raises :class:`JournalCorrupt` naming the first record that is damaged (checksum, shape, a
    kind column that is not its sealed kind) or not in its place (a record missing, moved or
    renumbered: its sealed seq is not the next one).
    """
    data = _joined(map(_BODY_OF_RECORD, rows))
    if data is None or not sealed_data(data):
        _diagnose_records(rows, after_seq)  # raises: if every blob is sealed, so is the batch
        data = b""  # pragma: no cover
    fold = FOLD
    schedule = _SCHEDULE
    seq = after_seq
    try:
        # The batch is intact, so it is the bodies as sealed, back to back: one decode of the
        # whole batch (:func:`_decoded`). Each row's sealed seq keeps the rows and the values
        # in step. (Bytes moved across a row boundary, the concatenation unchanged, decode to
        # exactly what was written, so the fold is right; ``check`` looks at each row alone
        # and reports them.)
        values = _decoded(data, len(rows))
        for i in range(len(rows)):
            # Read by index from typed tuples: compiled, untyped unpacking goes through an
            # iterator. A value that is not a 4-tuple (a damaged batch) raises: diagnosed below.
            sealed: tuple[Any, ...] = values[i]
            if len(sealed) != 4:
                raise _Bad
            fields = sealed[0]
            kind: int = sealed[1]  # compiled: an int check, then native compares
            stored_seq: int = sealed[2]
            seq += 1
            if stored_seq != seq or kind != rows[i][0]:
                raise _Bad
            if kind == schedule:
                version = schedule_rule(timers, fields, make)
            else:
                version = fold[kind](timers, fields, make)
                if kinds is not None:
                    kinds.add(kind)
            if version > max_version:
                max_version = version
    except Exception as exc:
        _diagnose_records(rows, after_seq)
        raise JournalCorrupt(f"record {seq}: damaged ({exc!r})", seq=seq) from exc
    return max_version


def _decoded(data: bytes, n: int) -> tuple[Any, ...]:
    """The ``n`` msgpack values stored back to back in ``data``, as one tuple, in one call:
    ``data`` is read as the array of ``n`` values it is the body of (an array header put
    before it). Raises if ``data`` holds fewer or more than ``n`` values, or is not msgpack.
    The same limits and options as every stored value (no code runs, str keys only)."""
    values: tuple[Any, ...] = msgpack.unpackb(
        _ARRAY_OF + n.to_bytes(4, "big") + data, raw=False, use_list=False, strict_map_key=True
    )
    return values


def _joined(bodies: Iterable[Any]) -> bytes | None:
    """The bodies back to back, or None if one is not a blob at all (a damaged row)."""
    try:
        return b"".join(bodies)
    except TypeError:
        return None


def _diagnose_records(rows: list[tuple[int, bytes]], after_seq: int) -> None:
    """Raise for the first bad row of a batch, saying what is wrong with it."""
    for seq, (kind, blob) in enumerate(rows, after_seq + 1):
        codec.open_record(blob, seq, kind)  # raises JournalCorrupt for a bad one


def fold_records(
    timers: dict[str, RowT],
    rows: list[tuple[int, int, bytes]],
    max_version: int,
    make: RowFactory[RowT] = TimerRow,  # type: ignore[assignment]  # RowT is TimerRow then
    kinds: set[int] | None = None,
) -> int:
    """Fold schema-1 ``(seq, kind, body)`` rows (no checksums) in order. Returns the new max
    version; raises :class:`JournalCorrupt` naming the first damaged record's seq. ``kinds``:
    as :func:`fold_sealed`'s (here every kind folded is added)."""
    unpackb = msgpack.unpackb
    fold = FOLD
    seq = kind = body = None
    try:
        for seq, kind, body in rows:  # noqa: B007 (they name a damaged record below)
            version = fold[kind](
                timers, unpackb(body, raw=False, use_list=False, strict_map_key=True), make
            )
            if version > max_version:
                max_version = version
            if kinds is not None:
                kinds.add(kind)
    except Exception as exc:
        codec.decode(kind, body, seq=seq)  # type: ignore[arg-type]  # raises with the reason
        raise JournalCorrupt(f"record {seq}: damaged ({exc!r})", seq=seq) from exc
    return max_version


def fold_snapshot(
    timers: dict[str, RowT],
    rows: list[tuple[str, int, float, bytes]],
    max_version: int,
    *,
    sealed: bool = True,
    make: RowFactory[RowT] = TimerRow,  # type: ignore[assignment]  # RowT is TimerRow then
    states: set[int] | None = None,
) -> int:
    """Decode ``(key, state, updated_at, body)`` snapshot rows into ``timers`` (rows made by
    ``make``).

    The same checks as :func:`journal.codec.decode_row` (``decode_row_v1`` when not
    ``sealed``), inlined, with one CRC pass and one decode for the whole batch (as
    :func:`fold_sealed`). Returns the new max version; raises
    :class:`~journal.errors.JournalCorrupt` naming the first damaged row's key. ``states``,
    when given, gets the state code of every row folded.
    """
    decode_row = codec.decode_row if sealed else codec.decode_row_v1
    data = b""  # schema 1: no batch to decode
    if sealed:
        joined = _joined(map(_BODY, rows))
        if joined is None or not sealed_data(joined):
            for row in rows:
                decode_row(*row)  # raises: if every body is sealed, so is the batch
        else:
            data = joined
    state_of = STATES
    n_states = len(STATES)
    new_row = make
    handlers: dict[str, str] = {}
    bad = _Bad
    key: Any = None
    try:
        # One decode of the whole batch (see fold_sealed); schema 1 has no checksums, so each
        # body is decoded on its own there (exact framing).
        values = _decoded(data, len(rows)) if sealed else tuple(map(_as_sealed_v1, rows))
        for i in range(len(rows)):
            # Read by index from typed tuples (see fold_sealed); a value that is not an 11- or
            # 12-tuple is a damaged row, diagnosed below.
            column: tuple[Any, ...] = rows[i]
            stored: tuple[Any, ...] = values[i]
            n = len(stored)  # 12: the timer's trace context follows its 7 fields
            if n != 11 and n != 12:
                raise bad
            trace = stored[7] if n == 12 else None
            x = n - 11  # where the checked copies start, past the trace context
            key = column[0]
            state = column[1]
            updated_at = column[2]
            version = stored[0]
            handler = stored[1]
            due = stored[2]
            payload = stored[3]
            attempts = stored[4]
            last_error = stored[5]
            first_attempt_at = stored[6]
            if (
                stored[7 + x] != key
                or stored[8 + x] != state
                or stored[9 + x] != updated_at
                or (trace is not None and type(trace) is not str)
                or type(key) is not str
                or type(state) is not int
                or not 0 <= state < n_states
                or not_num(updated_at)
                or type(version) is not int
                or type(handler) is not str
                or not_num(due)
                or (payload is not None and type(payload) is not bytes)
                or type(attempts) is not int
                or (last_error is not None and type(last_error) is not str)
                or (first_attempt_at is not None and not_num(first_attempt_at))
            ):
                raise bad
            if version > max_version:
                max_version = version
            timer = timers[key] = new_row(
                key,
                version,
                handlers.setdefault(handler, handler),
                due,
                payload,
                state_of[state],
                attempts,
                last_error,
                first_attempt_at,
                updated_at,
            )
            if trace is not None:
                timer.trace = trace
            if states is not None:
                states.add(state)
    except Exception as exc:
        for row in rows:
            decode_row(*row)  # raises with the reason
        raise JournalCorrupt(f"snapshot row {key!r}: damaged ({exc!r})") from exc
    return max_version


def _as_sealed_v1(row: tuple[str, int, float, bytes]) -> tuple[Any, ...]:
    """A schema-1 snapshot row's values, laid out as a sealed row's (no CRC)."""
    key, state, updated_at, body = row
    return (*codec.unpack(body), key, state, updated_at, None)
