"""Which partition a key belongs to: a stable hash, the same on every node and every release.

CRC-32 of the key's UTF-8 bytes, modulo the journal's partition count (fixed when the journal
was created, see :mod:`journal.postgres.schema`). Python's ``hash()`` would not do: it is salted
per process. Guaranteed: the same key maps to the same partition for the life of a journal.
Not guaranteed: an even spread of adversarial keys (CRC-32 is not a keyed hash).
"""

from __future__ import annotations

import zlib

__all__ = ["partition_of"]


def partition_of(key: str, partitions: int) -> int:
    """The partition of ``key`` in a journal of ``partitions`` partitions."""
    return zlib.crc32(key.encode("utf-8")) % partitions
