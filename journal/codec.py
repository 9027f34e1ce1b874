"""The record codec: a record <-> a row ``(kind, body)``.

``body`` is msgpack of the record's fields as an array, in declaration order, without the kind
(the kind is its own column). Payloads are already msgpack bytes and are stored as ``bin``.

Decoding never runs code: ``raw=False`` (str fields are UTF-8 ``str``), ``strict_map_key=True``,
no ``object_hook``/``ext_hook`` (an ext value stays an inert ``ExtType`` and then fails the shape
check), and every field is type-checked against the record's shape, so a damaged body raises
:class:`~journal.errors.JournalCorrupt` naming its ``seq`` instead of producing a wrong timer.
Encoding checks the same shapes, so nothing undecodable is ever written.
"""

from __future__ import annotations

import itertools
from typing import Any, Final

import msgpack

from journal.errors import JournalCorrupt
from journal.records import KIND_OF, TYPE_OF, Kind, Record
from journal.state import STATE_CODE, STATES, TimerRow

__all__ = [
    "SHAPES",
    "SIGNATURES",
    "check_fields",
    "decode",
    "decode_row",
    "encode",
    "encode_many",
    "encode_row",
    "unpack",
]

_STR: Final = (str,)
_INT: Final = (int,)
_FLOAT: Final = (float, int)
_BYTES_OR_NONE: Final = (bytes, type(None))

#: The type of each field of each kind, in field order. ``bool`` is not an ``int`` here.
SHAPES: Final[dict[Kind, tuple[tuple[type, ...], ...]]] = {
    # key, version, handler, due, payload, at
    Kind.SCHEDULE: (_STR, _INT, _STR, _FLOAT, _BYTES_OR_NONE, _FLOAT),
    # key, version, at
    Kind.CANCEL: (_STR, _INT, _FLOAT),
    # key, version, attempt, at
    Kind.ATTEMPT: (_STR, _INT, _INT, _FLOAT),
    # key, version, at
    Kind.ACK: (_STR, _INT, _FLOAT),
    # key, version, attempt, error, due, at
    Kind.RETRY: (_STR, _INT, _INT, _STR, _FLOAT, _FLOAT),
    # key, version, attempt, error, at
    Kind.DEAD: (_STR, _INT, _INT, _STR, _FLOAT),
    # key, version, new_version, due, at
    Kind.REDRIVE: (_STR, _INT, _INT, _FLOAT, _FLOAT),
}

#: Every allowed tuple of field types, per kind (for a fast ``tuple(map(type, f)) in ...``).
SIGNATURES: Final[dict[int, frozenset[tuple[type, ...]]]] = {
    int(k): frozenset(itertools.product(*shape)) for k, shape in SHAPES.items()
}
_TYPE_BY_INT: Final[dict[int, type[Record]]] = {int(k): cls for k, cls in TYPE_OF.items()}
_KIND_INT_OF: Final[dict[type[Record], int]] = {cls: int(k) for cls, k in KIND_OF.items()}

_packer = msgpack.Packer(use_bin_type=True, autoreset=True)


def check_fields(kind: int, fields: Any) -> bool:
    """True when ``fields`` (a decoded body) has exactly the shape of ``kind``."""
    sigs = SIGNATURES.get(kind)
    return sigs is not None and type(fields) is tuple and tuple(map(type, fields)) in sigs


def encode(record: Record) -> tuple[int, bytes]:
    """``(kind, body)`` for one record. Raises ``TypeError`` for a malformed record.

    Uses one module-level packer. That is safe from any thread: packing the checked field types
    (str, int, float, bytes, None in a tuple) runs no Python code, so it never releases the GIL.
    """
    kind = _KIND_INT_OF.get(type(record))
    if kind is None:
        raise TypeError(f"not a journal record: {type(record).__name__}")
    if tuple(map(type, record)) not in SIGNATURES[kind]:
        raise TypeError(f"malformed {type(record).__name__}: {record!r}")
    return kind, _packer.pack(record)


def encode_many(records: Any) -> list[tuple[int, bytes]]:
    """:func:`encode` for each record, in order. Raises ``TypeError`` before returning any."""
    return [encode(r) for r in records]


def unpack(body: bytes) -> Any:
    """msgpack -> Python values, the safe way (arrays as tuples). Raises msgpack/ValueError."""
    return msgpack.unpackb(body, raw=False, use_list=False, strict_map_key=True)


def decode(kind: int, body: bytes, *, seq: int | None = None) -> Record:
    """A row back into its record. Raises :class:`JournalCorrupt` naming ``seq`` if damaged."""
    cls = _TYPE_BY_INT.get(kind)
    if cls is None:
        raise JournalCorrupt(f"record {seq}: unknown kind {kind!r}", seq=seq)
    try:
        fields = msgpack.unpackb(body, raw=False, use_list=False, strict_map_key=True)
    except Exception as exc:  # msgpack raises several unrelated types for bad input
        raise JournalCorrupt(f"record {seq}: undecodable body ({exc})", seq=seq) from exc
    if not check_fields(kind, fields):
        raise JournalCorrupt(
            f"record {seq}: body does not match kind {_TYPE_BY_INT[kind].__name__}", seq=seq
        )
    return cls(*fields)


# -- snapshot rows ----------------------------------------------------------------------------
#
# A snapshot row is stored as (key, state code, updated_at, body) where body is msgpack of
# [version, handler, due, payload, attempts, last_error, first_attempt_at]. ``state`` and
# ``updated_at`` are columns so that retention can be applied in SQL.

_ROW_SHAPE: Final = (
    _INT,  # version
    _STR,  # handler
    _FLOAT,  # due
    _BYTES_OR_NONE,  # payload
    _INT,  # attempts
    (str, type(None)),  # last_error
    (float, int, type(None)),  # first_attempt_at
)


def encode_row(row: TimerRow, pack: Any = None) -> tuple[str, int, float, bytes]:
    """A :class:`TimerRow` as a ``snapshot`` row. ``pack``: a packer's ``pack`` to reuse."""
    fields = (
        row.version,
        row.handler,
        row.due,
        row.payload,
        row.attempts,
        row.last_error,
        row.first_attempt_at,
    )
    body = pack(fields) if pack is not None else msgpack.packb(fields, use_bin_type=True)
    return row.key, STATE_CODE[row.state], row.updated_at, body


def decode_row(key: Any, state: Any, updated_at: Any, body: Any) -> TimerRow:
    """A ``snapshot`` row back into a :class:`TimerRow`. Raises :class:`JournalCorrupt`."""
    try:
        f = msgpack.unpackb(body, raw=False, use_list=False, strict_map_key=True)
    except Exception as exc:
        raise JournalCorrupt(f"snapshot row {key!r}: undecodable body ({exc})") from exc
    if (
        type(key) is not str
        or type(state) is not int
        or not 0 <= state < len(STATES)
        or type(updated_at) not in _FLOAT
        or type(f) is not tuple
        or len(f) != len(_ROW_SHAPE)
        or any(type(v) not in t for v, t in zip(f, _ROW_SHAPE, strict=True))
    ):
        raise JournalCorrupt(f"snapshot row {key!r}: damaged")
    return TimerRow(key, f[0], f[1], f[2], f[3], STATES[state], f[4], f[5], f[6], updated_at)
