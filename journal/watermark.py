"""The high-water mark: the last committed seq, kept outside SQLite, to catch a lost tail.

SQLite trusts its WAL only up to the first frame whose checksum fails and silently drops every
frame after it; a deleted or truncated ``-wal`` drops them all. The journal then opens "whole"
but without its last commits. So after each commit the writer stores the highest committed seq
in a small sidecar file, ``<journal>-hwm`` beside the real file (where SQLite keeps ``-wal``),
mode 0o600, with one ``os.pwrite`` (no fsync of its own: what that leaves uncovered is below).
Recovery, writable opens and ``check`` compare it with the journal: a journal whose
highest seq (the newest record, or the snapshot's seq) is below the mark lost committed records,
and raises :class:`~journal.errors.JournalCorrupt` ("journal lost committed records N..M").

Covered: a process crash (the mark is in the OS's page cache once written, like the WAL), WAL
frames dropped after damage, a deleted, truncated or damaged ``-wal``, an old copy of the
journal put back in place of the current one. Not covered: a power loss before the OS wrote the
mark (it may then be older than the journal: never a false alarm with ``durability="full"``,
where the mark is written after the commit's fsync; with ``"normal"`` a power loss may lose the
last commits, which SQLite allows in that mode, and the mark then reports them); a journal copied
or moved without its ``-hwm``; damage to the mark itself (reported, never trusted).

The file is 24 bytes: ``b"WEHW"``, the journal's 8-byte id (``meta.journal_id``, so the mark of
a journal deleted and created anew is not held against the new one), the seq (8 bytes), and a
CRC-32 of those 20 bytes. A missing or empty file means "no mark yet" (a journal from before
schema 2, a copied file, a crash between creating the file and its first write): allowed, and the
next writable open writes one.
"""

from __future__ import annotations

import logging
import os
import struct
import zlib
from typing import Final, NamedTuple

from journal.errors import JournalCorrupt, JournalError
from journal.ownfiles import journal_owner, open_own, own_path

__all__ = ["HighWaterMark", "Mark", "mark_path", "new_journal_id", "read_mark", "verify_mark"]

logger = logging.getLogger(__name__)

_MAGIC: Final = b"WEHW"
_LAYOUT: Final = struct.Struct("<4s8sQI")  # magic, journal id, seq, crc32 of the first 20 bytes
#: Reads of a mark that is being rewritten can see a torn value; try this many times.
_READ_TRIES: Final = 3


class Mark(NamedTuple):
    """A high-water mark as read from its file."""

    journal_id: bytes
    seq: int


def new_journal_id() -> bytes:
    """8 random bytes that name a new journal (stored in ``meta.journal_id``)."""
    return os.urandom(8)


def mark_path(path: str) -> str:
    """The mark's file: beside the real file, as SQLite puts ``-wal`` (it follows symlinks)."""
    return own_path(path, "-hwm")


def _pack(journal_id: bytes, seq: int) -> bytes:
    head = _LAYOUT.pack(_MAGIC, journal_id, seq, 0)[:-4]
    return head + struct.pack("<I", zlib.crc32(head))


def _unpack(data: bytes, where: str) -> Mark | None:
    if not data:
        return None
    if len(data) == _LAYOUT.size:
        magic, journal_id, seq, crc = _LAYOUT.unpack(data)
        if magic == _MAGIC and crc == zlib.crc32(data[:-4]):
            return Mark(journal_id, seq)
    raise JournalCorrupt(
        f"the journal's high-water mark is damaged: {where} (it is checked, never trusted; "
        "remove it to open the journal without the check for lost records)"
    )


def read_mark(path: str) -> Mark | None:
    """The mark of the journal at ``path``, or None when there is none yet.

    Raises :class:`JournalCorrupt` for a damaged mark file. Read it *before* starting the read
    transaction it is compared with: the writer stores a mark only after its commit, so a mark
    read first is never ahead of what the transaction then sees.
    """
    where = mark_path(path)
    owner = journal_owner(path)
    for attempt in range(_READ_TRIES):
        try:
            fd = open_own(where, os.O_RDONLY, owner)  # never a link, a FIFO, another's file
            try:
                data = os.pread(fd, _LAYOUT.size + 1, 0)
            finally:
                os.close(fd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise JournalError(
                f"cannot read the journal's high-water mark ({exc}): {where}"
            ) from exc
        try:
            return _unpack(data, where)
        except JournalCorrupt:
            if attempt + 1 == _READ_TRIES:
                raise
    return None  # pragma: no cover - the loop returns or raises


def verify_mark(mark: Mark | None, journal_id: bytes | None, highest_seq: int, path: str) -> None:
    """Raise :class:`JournalCorrupt` when the journal holds fewer records than were committed.

    ``highest_seq``: the newest record's seq, or the snapshot's seq when that is higher. A mark
    of another journal (another id: this one was created anew at that path) is not held against
    this one.
    """
    if mark is None or journal_id is None or mark.journal_id != journal_id:
        return
    if highest_seq < mark.seq:
        raise JournalCorrupt(
            f"journal lost committed records {highest_seq + 1}..{mark.seq} (the last commits "
            f"are missing, e.g. a damaged or deleted -wal): {path}",
            seq=highest_seq + 1,
        )


class HighWaterMark:
    """The writer's handle on the mark file: :meth:`advance` after each commit."""

    __slots__ = ("_fd", "_journal_id", "_path", "_seq")

    def __init__(self, path: str, journal_id: bytes, seq: int) -> None:
        """Open (creating, 0o600) the mark of the journal at ``path`` and store ``seq``.

        Raises :class:`JournalError` for a link, a FIFO or another user's file in its place
        (:func:`journal.ownfiles.open_own`): nothing is created or written through a link."""
        self._path = mark_path(path)
        self._journal_id = journal_id
        self._seq = -1
        try:
            self._fd: int | None = open_own(self._path, os.O_RDWR | os.O_CREAT, journal_owner(path))
        except OSError as exc:
            raise JournalError(
                f"cannot create the journal's high-water mark ({exc}): {self._path}"
            ) from exc
        self.advance(seq)

    @property
    def seq(self) -> int:
        return self._seq

    def advance(self, seq: int) -> None:
        """Store ``seq`` (call only after the commit that made it the last seq returned).

        One ``pwrite``, no fsync. A failure is logged, not raised: the commit it follows is
        done, and a mark left behind only weakens the check (it never raises a false alarm).
        """
        fd = self._fd
        if fd is None or seq == self._seq:
            return
        try:
            os.pwrite(fd, _pack(self._journal_id, seq), 0)
        except OSError:
            logger.warning("cannot write the high-water mark %s", self._path, exc_info=True)
            return
        self._seq = seq

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)
