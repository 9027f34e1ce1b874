"""Checksums: a CRC-32 sealed into the end of every stored blob, checkable a batch at a time.

A sealed blob is ``P + le32(crc32(P, SEAL))``. CRC-32 has a residue: running it over any data
followed by that data's own CRC (little-endian) gives the constant :data:`SEAL`, whatever the
starting value. Starting at ``SEAL`` itself, one intact blob therefore ends at ``SEAL`` again,
and so does any concatenation of intact blobs: ``crc32(b"".join(blobs), SEAL) == SEAL``. A
damaged blob moves the running value off ``SEAL`` and no intact blob after it brings it back
(CRC is linear: the difference propagates). So recovery checks a whole fetched batch with one
call into zlib, not one call per row, and looks at single blobs only to name a damaged one.

What it proves: the bytes are the bytes that were sealed (a random change escapes with
probability 2**-32). It says nothing about who sealed them: it is a check against damage, not
against someone forging a journal (opening a journal never runs code from it anyway).
"""

from __future__ import annotations

import sqlite3
import zlib
from collections.abc import Mapping
from typing import Final

__all__ = [
    "BIN4",
    "META_CHECKSUM",
    "SEAL",
    "meta_checksum",
    "meta_sealed",
    "seal",
    "seal_meta",
    "sealed",
    "sealed_data",
]

#: CRC-32's residue (``crc32(data + le32(crc32(data, v)), v)`` for every ``data`` and ``v``).
SEAL: Final = 0x2144DF1C
#: msgpack's header of a 4-byte ``bin``: a sealed msgpack array ends with its CRC as a ``bin 4``
#: element, so the blob stays one valid msgpack value.
BIN4: Final = b"\xc4\x04"

_crc32 = zlib.crc32


def seal(prefix: bytes) -> bytes:
    """``prefix`` followed by its CRC-32 (started at :data:`SEAL`), little-endian."""
    return prefix + _crc32(prefix, SEAL).to_bytes(4, "little")


def sealed(blob: bytes) -> bool:
    """True when ``blob`` is intact (ends with the CRC of everything before it)."""
    return type(blob) is bytes and len(blob) >= 4 and _crc32(blob, SEAL) == SEAL


def sealed_data(data: bytes) -> bool:
    """True when ``data`` is intact sealed blobs back to back (one CRC pass over them all).

    A ``False`` says some blob is damaged, not which: look with :func:`sealed`. A ``True`` says
    the concatenation is what was sealed: blobs whose boundaries moved (bytes shifted from one
    row to the next, the concatenation the same) pass, and decode, back to back, to exactly
    what was written; :func:`sealed` on each blob alone tells them apart (``check`` does).
    """
    return _crc32(data, SEAL) == SEAL


#: The ``meta`` row that holds the checksum of the others.
META_CHECKSUM: Final = "checksum"


def meta_checksum(meta: Mapping[str, object]) -> int:
    """The checksum of the ``meta`` table's rows (``name -> value``), its own row left out."""
    text = ";".join(f"{k}={v!r}" for k, v in sorted(meta.items()) if k != META_CHECKSUM)
    return _crc32(text.encode(), SEAL)


def meta_sealed(meta: Mapping[str, object]) -> bool:
    """True when ``meta`` (every row, ``name -> value``) matches its checksum row."""
    return meta.get(META_CHECKSUM) == meta_checksum(meta)


def seal_meta(con: sqlite3.Connection) -> None:
    """Store the checksum of ``meta`` (call inside the transaction that changed it)."""
    meta = dict(con.execute("SELECT name, value FROM meta").fetchall())
    con.execute(
        "INSERT OR REPLACE INTO meta (name, value) VALUES (?, ?)",
        (META_CHECKSUM, meta_checksum(meta)),
    )
