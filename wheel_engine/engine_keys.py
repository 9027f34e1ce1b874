"""The keys the engine makes for timers scheduled without one: ``"<prefix>-<serial>"``.

One :class:`EngineKeys` per index by key (``wheel_engine.key_index``, which finds the timers of
the keys it makes by serial), used by ``wheel_engine.scheduling`` on SQLite and in memory;
``wheel_engine.nodes.scheduler`` keeps one of its own on PostgreSQL. Guaranteed: every key one
instance makes is new to it (serials count up from 1 and are never handed out twice; a key a
caller spells for a serial not made yet moves the count past it, see ``KeyIndex.put``), and the
prefix is 12 random hex digits drawn once per instance, so keys made by two engines (two
processes, two nodes of a cluster, a restart on the same journal) differ with overwhelming
probability: a key never needs to be checked against what is stored. A serial taken and not
used (a batch that went the general path) leaves a gap: harmless, keys stay unique.
"""

from __future__ import annotations

import secrets
from typing import Final

#: Hex digits of the random prefix: 48 bits, drawn once per instance.
PREFIX_BYTES: Final = 6


class EngineKeys:
    """The engine-made keys of one engine: see the module docstring.

    A batch's keys are numbered by its caller in one loop, without a call per key: it reads
    :attr:`next_serial`, makes ``key(serial)`` (or the same f-string inline, on a hot path) for
    each serial it uses, and calls :meth:`skip_to` past the last one before anything else runs.
    """

    __slots__ = ("next_serial", "prefix")

    def __init__(self) -> None:
        self.prefix = secrets.token_hex(PREFIX_BYTES)  # never changes
        self.next_serial = 1  # the serial of the next key made

    def new(self) -> str:
        """A new key (the next serial)."""
        serial = self.next_serial
        self.next_serial = serial + 1
        return f"{self.prefix}-{serial}"

    def take(self) -> int:
        """A new serial: the key ``key(serial)``, which a timer may keep unspelled
        (``Timer.serial``)."""
        serial = self.next_serial
        self.next_serial = serial + 1
        return serial

    def key(self, serial: int) -> str:
        """The key of ``serial``, as :meth:`new` spells it."""
        return f"{self.prefix}-{serial}"

    def skip_to(self, serial: int) -> None:
        """Serials below ``serial`` are taken: the next key made has ``serial``."""
        self.next_serial = serial
