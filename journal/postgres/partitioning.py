"""Which partition a key belongs to: a stable hash, the same on every node and every release.

CRC-32 of the key's UTF-8 bytes, modulo the journal's partition count (fixed when the journal
was created, see :mod:`journal.postgres.schema`), except for **a recurrence's keys**, which
take the partition of the recurrence's name. Python's ``hash()`` would not do: it is salted
per process.

A recurrence's keys are the keys of that shape (:func:`recurrence_name`): ``NAME@rule`` (its
record) and ``NAME@YYYY-MM-DDTHH:MM:SS[.fff|.ffffff]Z`` (an occurrence), where ``NAME`` is
non-empty and holds no ``@``: exactly what ``wheel_engine.recurring``'s ``rule_key`` and
``occurrence_key`` spell, since a recurrence's name may not contain ``@``. The shape alone
decides, not whether the time is one a rule would produce, so the rule is a function of the
key's characters only. Any other key keeps its own CRC-32, ``user@example.com`` and
``a@b@rule`` included. An ordinary timer whose key happens to have that shape (``report@rule``)
is placed beside ``report``'s: a placement only, every guarantee below holds for it too.

Guaranteed:

- the same key maps to the same partition for the life of a journal (a journal of schema 2,
  written before this rule, has its recurrences' rows moved once, by the migration of
  :mod:`journal.postgres.repartition`);
- all keys of one recurrence share one partition, so one node at a time (its lease's holder)
  materialises and fires its occurrences; ``overlap=False`` then sees a running predecessor.

Not guaranteed: an even spread of adversarial keys (CRC-32 is not a keyed hash); nor of
recurrences, each of which weighs on one partition however many occurrences it has.
"""

from __future__ import annotations

import re
import zlib
from typing import Final

__all__ = ["partition_of", "recurrence_name"]

# What separates a recurrence's name from the rest of its keys (``wheel_engine.recurring``).
_SEPARATOR: Final = "@"
_ENDINGS: Final = ("@rule", "Z")
# ASCII digits only ([0-9], not \d: \d matches any Unicode digit). A due time lies in
# [0, 9999-12-31T23:59:59Z], so its year always has four digits.
_RECURRENCE_KEY: Final = re.compile(
    r"([^@]+)@(?:rule|[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}"
    r"(?:\.[0-9]{3}|\.[0-9]{6})?Z)"
)


def recurrence_name(key: str) -> str | None:
    """The recurrence ``key`` belongs to (see the module doc), or None for any other key."""
    if not key.endswith(_ENDINGS):  # most keys with an @ (addresses), without the regex
        return None
    found = _RECURRENCE_KEY.fullmatch(key)
    return None if found is None else found.group(1)


def partition_of(key: str, partitions: int) -> int:
    """The partition of ``key`` in a journal of ``partitions`` partitions: that of its
    recurrence's name for a recurrence's key, else that of its own CRC-32."""
    if _SEPARATOR in key:  # a key without one (the common case) pays this scan alone
        key = recurrence_name(key) or key
    return zlib.crc32(key.encode("utf-8")) % partitions
