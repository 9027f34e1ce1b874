"""The record codec: round trips, shape checks, damage named by seq."""

from __future__ import annotations

import math
import sqlite3

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from journal import codec
from journal.errors import JournalCorrupt
from journal.records import (
    KIND_OF,
    Ack,
    Attempt,
    Cancel,
    Dead,
    Kind,
    Record,
    Redrive,
    Retry,
    Schedule,
)
from journal.recovery import fold_snapshot
from journal.state import STATES, TimerRow

keys = st.text(min_size=1, max_size=40)
versions = st.integers(min_value=1, max_value=2**63 - 1)
attempts = st.integers(min_value=1, max_value=1000)
times = st.floats(allow_nan=False, allow_infinity=False, width=64)
payloads = st.none() | st.binary(max_size=200)
errors = st.text(max_size=200)

records: st.SearchStrategy[Record] = st.one_of(
    st.builds(Schedule, keys, versions, st.text(min_size=1, max_size=30), times, payloads, times),
    st.builds(Cancel, keys, versions, times),
    st.builds(Attempt, keys, versions, attempts, times),
    st.builds(Ack, keys, versions, times),
    st.builds(Retry, keys, versions, attempts, errors, times, times),
    st.builds(Dead, keys, versions, attempts, errors, times),
    st.builds(Redrive, keys, versions, versions, times, times),
)


@given(records)
def test_round_trip(record: Record) -> None:
    kind, body = codec.encode(record)
    assert kind == KIND_OF[type(record)]
    assert isinstance(body, bytes)
    back = codec.decode(kind, body, seq=7)
    assert type(back) is type(record)
    assert back == record


@given(st.lists(records, max_size=20))
def test_encode_many_keeps_order(batch: list[Record]) -> None:
    rows = codec.encode_many(batch)
    assert [codec.decode(k, b) for k, b in rows] == batch


def test_body_is_msgpack_array_without_kind() -> None:
    kind, body = codec.encode(Cancel("k", 3, 1.5))
    assert kind == Kind.CANCEL
    assert msgpack.unpackb(body, raw=False) == ["k", 3, 1.5]


@pytest.mark.parametrize(
    "bad",
    [
        Cancel(1, 3, 1.0),  # type: ignore[arg-type]
        Cancel("k", "3", 1.0),  # type: ignore[arg-type]
        Cancel("k", True, 1.0),  # bool is not a version
        Schedule("k", 1, "h", 1.0, {"not": "bytes"}, 1.0),  # type: ignore[arg-type]
        Attempt("k", 1, 1.5, 1.0),  # type: ignore[arg-type]
    ],
)
def test_encode_rejects_malformed_records(bad: Record) -> None:
    with pytest.raises(TypeError):
        codec.encode(bad)


def test_encode_rejects_non_records() -> None:
    with pytest.raises(TypeError):
        codec.encode(("k", 1, 1.0))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kind", "body"),
    [
        (int(Kind.CANCEL), b"\xc1"),  # never-used msgpack byte
        (int(Kind.CANCEL), b""),
        (int(Kind.CANCEL), b"garbage!"),
        (int(Kind.CANCEL), msgpack.packb(["k", 1])),  # too short
        (int(Kind.CANCEL), msgpack.packb(["k", 1, 1.0, 4])),  # too long
        (int(Kind.CANCEL), msgpack.packb([1, 1, 1.0])),  # key not str
        (int(Kind.CANCEL), msgpack.packb({"k": 1})),  # not an array
        (int(Kind.SCHEDULE), msgpack.packb(["k", 1, "h", 1.0, "text", 1.0])),  # payload str
        (int(Kind.CANCEL), msgpack.packb(["k", msgpack.ExtType(5, b"x"), 1.0])),
        (99, msgpack.packb(["k", 1, 1.0])),  # unknown kind
        (int(Kind.CANCEL), msgpack.packb(["k", 1, 1.0]) + b"\x01"),  # trailing bytes
    ],
)
def test_decode_damage_names_seq(kind: int, body: bytes) -> None:
    with pytest.raises(JournalCorrupt) as info:
        codec.decode(kind, body, seq=42)
    assert info.value.seq == 42
    assert "42" in str(info.value)


def test_decode_never_runs_code() -> None:
    # An ext value (what a pickle-ish extension would use) stays inert and is rejected.
    body = msgpack.packb(["k", 1, "h", 1.0, msgpack.ExtType(1, b"cos\nsystem"), 1.0])
    with pytest.raises(JournalCorrupt):
        codec.decode(int(Kind.SCHEDULE), body, seq=1)


rows = st.builds(
    TimerRow,
    keys,
    versions,
    st.text(min_size=1, max_size=20),
    times,
    payloads,
    st.sampled_from(STATES),
    st.integers(min_value=0, max_value=100),
    st.none() | errors,
    st.none() | times,
    times,
)


@given(rows)
def test_snapshot_row_round_trip(row: TimerRow) -> None:
    key, state, updated_at, body = codec.encode_row(row)
    assert codec.decode_row(key, state, updated_at, body) == row
    # recovery's inlined decoder agrees, also with a reused packer
    pack = msgpack.Packer(use_bin_type=True, autoreset=True).pack
    encoded = codec.encode_row(row, pack)
    assert encoded == (key, state, updated_at, body)
    timers: dict[str, TimerRow] = {}
    assert fold_snapshot(timers, [encoded], 0) == max(0, row.version)
    assert timers == {row.key: row}


def test_snapshot_row_damage() -> None:
    row = TimerRow("k", 1, "h", 1.0, None, "PENDING", 0, None, None, 1.0)
    key, state, updated_at, body = codec.encode_row(row)
    with pytest.raises(JournalCorrupt):
        codec.decode_row(key, 99, updated_at, body)
    with pytest.raises(JournalCorrupt):
        codec.decode_row(key, state, updated_at, body[:-2])
    with pytest.raises(JournalCorrupt):
        codec.decode_row(key, state, "soon", body)
    for damaged in [(key, 99, updated_at, body), (key, state, updated_at, body[:-2])]:
        with pytest.raises(JournalCorrupt, match="'k'"):
            fold_snapshot({}, [damaged], 0)


def test_floats_survive_exactly() -> None:
    for value in (0.1, 1e-300, 1.7976931348623157e308, -0.0, math.pi):
        rec = Retry("k", 1, 2, "e", value, value)
        assert codec.decode(*codec.encode(rec)) == rec


# -- the engine's pre-encoded rows ------------------------------------------------------------


@pytest.mark.parametrize("payload", [None, b"\x81\xa1a\x01"])
def test_schedule_row_is_the_encoded_schedule_record(payload: bytes | None) -> None:
    fields = ("k", 7, "h", 1234.5, payload, 99.25)
    assert codec.schedule_row(*fields) == codec.encode(Schedule(*fields))


def _sealed(first: int, rows: list[tuple[int, bytes]]) -> list[tuple[int, int, bytearray]]:
    """``seal_params`` of ``(kind, body)`` rows, as the writer keeps them (two lists), one row
    a statement: each row's ``(seq, kind, sealed)``."""
    kinds, bodies = [kind for kind, _ in rows], [body for _, body in rows]
    one_each = codec.seal_params(first, kinds, bodies, 0, len(rows), 1)
    return [(seq, kind, sealed) for seq, kind, sealed in one_each]


def test_seal_params_seal_like_seal_record_from_the_first_seq() -> None:
    rows = codec.encode_many([Schedule("k", 1, "h", 5.0, None, 1.0), Ack("k", 1, 2.0)] * 200)
    first = 2**32 - 100  # the seq's msgpack form widens inside the batch
    expected = [
        (seq, kind, codec.seal_record(seq, kind, body))
        for seq, (kind, body) in enumerate(rows, first)
    ]
    assert _sealed(first, rows) == expected
    assert _sealed(1, []) == []


def test_seal_params_hand_sqlite_bytearrays_which_it_binds_without_its_adapter_lookup() -> None:
    """sqlite3 binds exactly int, float, str and bytearray at once; a bytes parameter goes
    through its adapter registry first (about 380 ns of a 1 µs insert). The blob stored, and
    read back, is the same."""
    rows = codec.encode_many([Schedule("k", 1, "h", 5.0, None, 1.0)] * 3)
    sealed = _sealed(70_000, rows)
    assert [type(record) for _, _, record in sealed] == [bytearray] * 3
    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE records (seq INTEGER PRIMARY KEY, kind INTEGER, body BLOB)")
    con.executemany("INSERT INTO records VALUES (?, ?, ?)", sealed)
    stored = con.execute("SELECT seq, kind, body FROM records ORDER BY seq").fetchall()
    assert stored == [(seq, kind, bytes(record)) for seq, kind, record in sealed]
    assert all(type(body) is bytes for _, _, body in stored)


@pytest.mark.parametrize("first", [1, 120, 250, 2**16 - 100, 2**32 - 100, 2**64 - 300])
def test_seal_params_seal_like_seal_record_across_every_width_of_the_seq(first: int) -> None:
    """The seq's msgpack form widens at 128, 256, 2**16, 2**32 (seal_params writes the uint 32
    form itself, msgpack the others); each kind, each width, the same bytes as seal_record."""
    records = [
        Schedule("k", 1, "h", 5.0, b"p", 1.0),
        Cancel("k", 1, 2.0),
        Ack("k", 1, 2.0),
    ]
    rows = codec.encode_many(records * 70)
    expected = [
        (seq, kind, codec.seal_record(seq, kind, body))
        for seq, (kind, body) in enumerate(rows, first)
    ]
    assert _sealed(first, rows) == expected


@pytest.mark.parametrize("per", [16, 256])
def test_seal_params_of_many_rows_a_statement_are_one_row_a_statement_flattened(per: int) -> None:
    """Rows 32 to 32 + 2 * 256 of a batch, ``per`` to a list: each list is the next ``per``
    rows' (seq, kind, sealed) in order, seqs counted from the batch's first row, the seq
    widening to uint 32 inside."""
    rows = codec.encode_many([Schedule("k", 1, "h", 5.0, b"p", 1.0), Cancel("k", 1, 2.0)] * 400)
    kinds = [kind for kind, _ in rows]
    bodies = [body for _, body in rows]
    first = 2**16 - 200
    start, stop = 32, 32 + 2 * 256
    lists = list(codec.seal_params(first, kinds, bodies, start, stop, per))
    assert all(len(params) == 3 * per for params in lists)
    flat = [value for params in lists for value in params]
    expected = _sealed(first, rows)[start:stop]
    assert flat == [value for row in expected for value in row]
    assert all(type(value) is bytearray for value in flat[2::3])
