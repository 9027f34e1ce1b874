"""Sealed blobs: one CRC pass proves a whole batch intact; any change is caught."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from journal import codec
from journal.checksum import SEAL, meta_checksum, meta_sealed, seal, sealed, sealed_data
from journal.records import Ack
from journal.state import TimerRow


@given(st.lists(st.binary(max_size=200), max_size=20))
def test_sealed_blobs_back_to_back_end_at_the_seal(prefixes: list[bytes]) -> None:
    blobs = [seal(p) for p in prefixes]
    assert all(sealed(b) for b in blobs)
    assert sealed_data(b"".join(blobs))


@given(st.lists(st.binary(min_size=1, max_size=100), min_size=1, max_size=10), st.randoms())
def test_any_flipped_byte_in_a_batch_is_caught(prefixes: list[bytes], rnd: random.Random) -> None:
    data = bytearray(b"".join(seal(p) for p in prefixes))
    data[rnd.randrange(len(data))] ^= rnd.randrange(1, 256)
    assert not sealed_data(bytes(data))


def test_seal_is_the_crc32_residue() -> None:
    assert SEAL == 0x2144DF1C
    assert not sealed(b"abc") and not sealed("text")  # type: ignore[arg-type]


def test_a_sealed_record_covers_its_seq_and_kind() -> None:
    kind, body = codec.encode(Ack("k", 1, 2.0))
    blob = codec.seal_record(7, kind, body)
    assert codec.open_record(blob, 7, kind) == Ack("k", 1, 2.0)
    for seq, column in ((8, kind), (7, kind + 1)):  # renumbered, or given another kind
        try:
            codec.open_record(blob, seq, column)
        except Exception as exc:
            assert type(exc).__name__ == "JournalCorrupt" and str(seq) in str(exc)
        else:
            raise AssertionError("not caught")


def test_a_sealed_snapshot_row_covers_its_columns() -> None:
    row = TimerRow("k", 3, "h", 1.0, b"\x90", "DEAD", 2, "e", 0.5, 9.0)  # type: ignore[arg-type]
    key, state, updated_at, body = codec.encode_row(row)
    assert codec.decode_row(key, state, updated_at, body) == row
    for columns in (("K", state, updated_at), (key, 2, updated_at), (key, state, 0.0)):
        try:
            codec.decode_row(*columns, body)
        except Exception as exc:
            assert type(exc).__name__ == "JournalCorrupt"
        else:
            raise AssertionError(f"not caught: {columns}")


def test_meta_checksum() -> None:
    meta: dict[str, object] = {"schema_version": 2, "snapshot_seq": 5, "journal_id": b"12345678"}
    meta["checksum"] = meta_checksum(meta)
    assert meta_sealed(meta)
    assert not meta_sealed({**meta, "snapshot_seq": 6})


def test_payload_problem() -> None:
    assert codec.payload_problem(None) is None
    assert codec.payload_problem(b"\x81\x92\x01\x02\xa1x") is None  # {(1, 2): "x"} decodes
    for bad in (b"\xc1", b"\xa3\xff\xfe\xfd", b"\x92\x01"):  # reserved, not UTF-8, truncated
        assert codec.payload_problem(bad) is not None
