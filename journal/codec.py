"""The record codec: a record <-> a row, and the sealed forms a schema-2 journal stores.

A record's *body* (:func:`encode` / :func:`decode`) is msgpack of its fields as an array, in
declaration order, without the kind. Payloads are already msgpack bytes and are stored as ``bin``.
A schema-1 journal stores that body as it is.

A schema-2 journal stores each record *sealed* (:func:`seal_record`): the msgpack array
``[fields, kind, seq, crc]``, where ``crc`` is a 4-byte ``bin`` holding the CRC-32 of all the
bytes before it (:mod:`journal.checksum`). So the checksum covers the seq, the kind and the body:
a row moved, renumbered or given another kind no longer matches what its blob says. A snapshot
row is sealed the same way: ``[fields, key, state, updated_at, crc]`` carries a copy of the
row's ``key``, ``state`` and ``updated_at`` columns (they stay columns, for SQL), and readers
check the columns against it.

Decoding never runs code: ``raw=False`` (str fields are UTF-8 ``str``), ``strict_map_key=True``,
no ``object_hook``/``ext_hook`` (an ext value stays an inert ``ExtType`` and then fails the shape
check), and every field is type-checked against the record's shape, so a damaged body raises
:class:`~journal.errors.JournalCorrupt` naming its ``seq`` instead of producing a wrong timer.
Encoding checks the same shapes, so nothing undecodable is ever written.

Optional trailing fields: a ``Schedule`` and a ``Redrive`` may carry one more field, a trace
context (``str``), and a snapshot row one more (the timer's trace context) before its checked
copies. A record or row without one is stored exactly as before (no byte more), so a journal
that never saw tracing reads the same on every version; one that holds traced records reads
as damaged on a wheel-engine older than the field (``docs/design.md``, "Tracing").
"""

from __future__ import annotations

import itertools
import zlib
from collections.abc import Iterator
from typing import Any, Final

import msgpack

from journal.checksum import BIN4, SEAL, seal, sealed
from journal.errors import JournalCorrupt
from journal.records import KIND_OF, TYPE_OF, Kind, Record
from journal.state import STATE_CODE, STATES, TimerRow

__all__ = [
    "SCHEDULE_KIND",
    "SHAPES",
    "SIGNATURES",
    "TRACED",
    "check_fields",
    "decode",
    "decode_row",
    "decode_row_v1",
    "encode",
    "encode_many",
    "encode_row",
    "open_record",
    "payload_problem",
    "schedule_body",
    "schedule_row",
    "seal_params",
    "seal_record",
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
#: The kinds that may carry a trace context as one more, trailing, ``str`` field.
TRACED: Final = frozenset({int(Kind.SCHEDULE), int(Kind.REDRIVE)})
SIGNATURES: Final[dict[int, frozenset[tuple[type, ...]]]] = {
    int(k): frozenset(itertools.product(*shape))
    | (frozenset(itertools.product(*shape, _STR)) if int(k) in TRACED else frozenset())
    for k, shape in SHAPES.items()
}
_TYPE_BY_INT: Final[dict[int, type[Record]]] = {int(k): cls for k, cls in TYPE_OF.items()}
_KIND_INT_OF: Final[dict[type[Record], int]] = {cls: int(k) for cls, k in KIND_OF.items()}

_packer = msgpack.Packer(use_bin_type=True, autoreset=True)
_crc32: Final = zlib.crc32


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
    fields: tuple[Any, ...] = record
    if kind in TRACED and fields[-1] is None:  # no trace context: stored without the field
        fields = fields[:-1]
    if tuple(map(type, fields)) not in SIGNATURES[kind]:
        raise TypeError(f"malformed {type(record).__name__}: {record!r}")
    return kind, _packer.pack(fields)


def encode_many(records: Any) -> list[tuple[int, bytes]]:
    """:func:`encode` for each record, in order. Raises ``TypeError`` before returning any."""
    return [encode(r) for r in records]


SCHEDULE_KIND: Final = int(Kind.SCHEDULE)  #: a Schedule row's kind, as the writer takes it


def schedule_row(
    key: str,
    version: int,
    handler: str,
    due: float,
    payload: bytes | None,
    at: float,
    trace: str | None = None,
) -> tuple[int, bytes]:
    """``encode(Schedule(key, version, handler, due, payload, at))`` without building the record
    or checking its shape: for callers that built the fields themselves from checked values
    (the engine's schedule paths). Compiled, the annotations are checked at the call (a ``str``
    that is not one raises ``TypeError``); pure Python checks nothing, so the caller must.
    ``due`` and ``at`` must be floats: an int would be stored as an int (still decodable).
    ``trace``: the timer's trace context, a trailing seventh field when given."""
    if trace is not None:
        return SCHEDULE_KIND, _packer.pack((key, version, handler, due, payload, at, trace))
    return SCHEDULE_KIND, schedule_body(key, version, handler, due, payload, at)


def schedule_body(
    key: str, version: int, handler: str, due: float, payload: bytes | None, at: float
) -> bytes:
    """:func:`schedule_row`'s body alone (its kind is ``Kind.SCHEDULE``), untraced."""
    body: bytes = _packer.pack((key, version, handler, due, payload, at))
    return body


def unpack(body: bytes) -> Any:
    """msgpack -> Python values, the safe way (arrays as tuples). Raises msgpack/ValueError."""
    return msgpack.unpackb(body, raw=False, use_list=False, strict_map_key=True)


def decode(kind: int, body: bytes, *, seq: int | None = None) -> Record:
    """A body back into its record. Raises :class:`JournalCorrupt` naming ``seq`` if damaged."""
    try:
        fields = unpack(body)
    except Exception as exc:  # msgpack raises several unrelated types for bad input
        raise JournalCorrupt(f"record {seq}: undecodable body ({exc})", seq=seq) from exc
    return _record_of(kind, fields, seq)


def _record_of(kind: Any, fields: Any, seq: int | None) -> Record:
    cls = _TYPE_BY_INT.get(kind) if type(kind) is int else None
    if cls is None:
        raise JournalCorrupt(f"record {seq}: unknown kind {kind!r}", seq=seq)
    if not check_fields(kind, fields):
        raise JournalCorrupt(f"record {seq}: body does not match kind {cls.__name__}", seq=seq)
    return cls(*fields)


#: ``_KIND_BYTE[kind]``: the kind as one msgpack positive fixint (every kind is below 128).
_KIND_BYTE: Final[dict[int, bytes]] = {int(k): bytes((int(k),)) for k in Kind}
_SEALED_RECORD: Final = b"\x94"  # msgpack fixarray of 4: fields, kind, seq, crc
_EMPTY: Final = bytearray()  # its join makes a new bytearray of the parts; itself stays empty


def seal_record(seq: int, kind: int, body: bytes) -> bytes:
    """The stored (schema 2) form of the record ``(kind, body)`` committed as ``seq``."""
    return seal(b"".join((_SEALED_RECORD, body, _KIND_BYTE[kind], _packer.pack(seq), BIN4)))


def _kind_tails(marker: bytes, width: int) -> dict[int, int]:
    """For each kind, the int that, or'ed with ``seq << 16`` and written big-endian, is what
    follows a record's body when msgpack packs its seq after ``marker`` in ``width`` bytes:
    the kind, the marker, the seq, BIN4."""
    return {
        kind: int.from_bytes(byte + marker + bytes(width) + BIN4, "big")
        for kind, byte in _KIND_BYTE.items()
    }


_TAIL_UINT16: Final = _kind_tails(b"\xcd", 2)  # seqs 256..65535: a 6-byte tail
_TAIL_UINT32: Final = _kind_tails(b"\xce", 4)  # seqs 65536..2**32-1: an 8-byte tail


def seal_params(
    first: int, kinds: list[int], bodies: list[bytes], start: int, stop: int, per: int
) -> Iterator[list[Any]]:
    """Rows ``start`` to ``stop`` of a batch (``kinds[i]``, ``bodies[i]``; ``stop - start`` a
    multiple of ``per``), row ``i`` sealed as seq ``first + i``, in flat lists of ``per`` rows:
    ``[seq, kind, sealed, seq, kind, sealed, ...]``, the parameters of one INSERT of ``per``
    rows (:mod:`journal.inserts`). Each ``sealed`` is :func:`seal_record`'s bytes, which the
    tests check for every width of the seq.

    A generator, which ``executemany`` consumes as it inserts: each list is freed once bound,
    rather than 20,000 rows' parameters, new and alive together, counting toward the cyclic
    collector's next runs (which walk the schedules waiting for this very commit).

    Each sealed record is a ``bytearray``: ``sqlite3`` binds a ``bytearray`` as a blob at once,
    but sends ``bytes`` through its adapter registry first (a key tuple, a dict lookup and two
    failed attribute lookups per row). The stored blob is the same; it reads back as
    ``bytes``."""
    for group in range(start, stop, per):
        params: list[Any] = []
        for i in range(group, group + per):
            seq = first + i
            kind = kinds[i]
            params.append(seq)
            params.append(kind)
            params.append(_sealed_row(seq, kind, bodies[i]))
        yield params


def _sealed_row(seq: int, kind: int, body: bytes) -> bytearray:
    """:func:`seal_record` of one row, as a ``bytearray``, with no Python call for seqs from
    256 to 2**32, whose msgpack form is written here (compiled, the call itself is native)."""
    if 0x10000 <= seq < 0x100000000:
        tail = (_TAIL_UINT32[kind] | seq << 16).to_bytes(8, "big")
    elif 0x100 <= seq < 0x10000:
        tail = (_TAIL_UINT16[kind] | seq << 16).to_bytes(6, "big")
    else:  # a fixint or uint 8 (a journal's first 255 records), or a uint 64
        tail = b"".join((_KIND_BYTE[kind], _packer.pack(seq), BIN4))
    prefix = _SEALED_RECORD + body + tail
    # checksum.seal(prefix), inline: no Python call per row in the writer's loop.
    # The bytearray's join copies both parts once, with no intermediate bytes of the whole.
    crc = _crc32(prefix, SEAL).to_bytes(4, "little")
    return _EMPTY.join((prefix, crc))


def open_record(blob: Any, seq: int, kind_column: Any = None) -> Record:
    """A stored (schema 2) record back, the careful way: everything checked, the first problem
    raised as :class:`JournalCorrupt` naming ``seq`` (the row's seq), also a ``kind_column``
    (the row's kind, when given) that is not the sealed kind. Recovery's hot loop does the same
    checks faster; this one says what is wrong."""
    if not sealed(blob):
        raise JournalCorrupt(f"record {seq}: checksum mismatch (the row is damaged)", seq=seq)
    try:
        fields, kind, stored_seq, _crc = unpack(blob)
    except Exception as exc:
        raise JournalCorrupt(f"record {seq}: undecodable ({exc})", seq=seq) from exc
    if stored_seq != seq:
        raise JournalCorrupt(
            f"record {seq}: holds record {stored_seq!r} (a row moved or renumbered)", seq=seq
        )
    record = _record_of(kind, fields, seq)
    if kind_column is not None and kind_column != kind:
        raise JournalCorrupt(
            f"record {seq}: its kind column ({kind_column!r}) is not its sealed kind "
            f"({Kind(kind).name})",
            seq=seq,
        )
    return record


def payload_problem(payload: bytes | None) -> str | None:
    """Why ``payload`` (a timer's msgpack bytes) cannot be decoded, or None when it can.

    Decoded as a reader of the payload would (``raw=False``: strings must be UTF-8), with
    tuples for arrays, so that a map keyed by arrays still decodes.
    """
    if payload is None:
        return None
    try:
        msgpack.unpackb(payload, raw=False, use_list=False, strict_map_key=False)
    except Exception as exc:  # msgpack raises several unrelated types for bad input
        return f"payload is not decodable msgpack ({type(exc).__name__}: {exc})"
    return None


# -- snapshot rows ----------------------------------------------------------------------------
#
# A snapshot row is stored as (key, state code, updated_at, body). ``state`` and ``updated_at``
# are columns so that retention can be applied in SQL. The fields of the body are
# [version, handler, due, payload, attempts, last_error, first_attempt_at], then the trace
# context only when the timer has one; schema 1 stores that array as the body, schema 2 seals
# [*fields, key, state, updated_at] (see the module docstring).

ROW_SHAPE: Final = (
    _INT,  # version
    _STR,  # handler
    _FLOAT,  # due
    _BYTES_OR_NONE,  # payload
    _INT,  # attempts
    (str, type(None)),  # last_error
    (float, int, type(None)),  # first_attempt_at
)
_SEALED_ROW: Final = b"\x9b"  # msgpack fixarray of 11: 7 fields, key, state, updated_at, crc
_SEALED_TRACED_ROW: Final = b"\x9c"  # of 12: the same with the trace context as an 8th field


def encode_row(row: TimerRow, pack: Any = None) -> tuple[str, int, float, bytes]:
    """A :class:`TimerRow` as a sealed ``snapshot`` row. ``pack``: a packer's ``pack`` to reuse."""
    code = STATE_CODE[row.state]
    fields: tuple[Any, ...] = (
        row.version,
        row.handler,
        row.due,
        row.payload,
        row.attempts,
        row.last_error,
        row.first_attempt_at,
    )
    header = _SEALED_ROW
    if row.trace is not None:
        fields += (row.trace,)
        header = _SEALED_TRACED_ROW
    packed = (pack or _packer.pack)((*fields, row.key, code, row.updated_at))
    # ``packed`` starts with the header of a 10- (11-) array; the sealed row is 11 (12) with
    # the CRC.
    return row.key, code, row.updated_at, seal(header + packed[1:] + BIN4)


def decode_row(key: Any, state: Any, updated_at: Any, body: Any) -> TimerRow:
    """A sealed ``snapshot`` row back into a :class:`TimerRow`. Raises :class:`JournalCorrupt`
    naming the row's key: a checksum mismatch, a column that disagrees with the sealed copy,
    or a shape that is not a timer's."""
    if not sealed(body):
        raise JournalCorrupt(f"snapshot row {key!r}: checksum mismatch (the row is damaged)")
    try:
        *fields, stored_key, stored_state, stored_updated_at, _crc = unpack(body)
    except Exception as exc:
        raise JournalCorrupt(f"snapshot row {key!r}: undecodable body ({exc})") from exc
    if (stored_key, stored_state, stored_updated_at) != (key, state, updated_at):
        raise JournalCorrupt(
            f"snapshot row {key!r}: its columns (key, state, updated_at) do not match the row "
            f"sealed as {stored_key!r} (a changed or moved row)"
        )
    return _row_of(key, state, updated_at, tuple(fields))


def decode_row_v1(key: Any, state: Any, updated_at: Any, body: Any) -> TimerRow:
    """A schema-1 ``snapshot`` row (no checksum) back into a :class:`TimerRow`."""
    try:
        fields = unpack(body)
    except Exception as exc:
        raise JournalCorrupt(f"snapshot row {key!r}: undecodable body ({exc})") from exc
    return _row_of(key, state, updated_at, fields)


def _row_of(key: Any, state: Any, updated_at: Any, f: Any) -> TimerRow:
    if (
        type(key) is not str
        or type(state) is not int
        or not 0 <= state < len(STATES)
        or type(updated_at) not in _FLOAT
        or type(f) is not tuple
        or len(f) not in _ROW_LENGTHS
        or any(type(v) not in t for v, t in zip(f, _TRACED_ROW_SHAPE, strict=False))
    ):
        raise JournalCorrupt(f"snapshot row {key!r}: damaged")
    trace = f[7] if len(f) > 7 else None
    return TimerRow(key, f[0], f[1], f[2], f[3], STATES[state], f[4], f[5], f[6], updated_at, trace)


_TRACED_ROW_SHAPE: Final = (*ROW_SHAPE, _STR)  # a row's fields with the trace context
_ROW_LENGTHS: Final = (len(ROW_SHAPE), len(_TRACED_ROW_SHAPE))
