"""The single-writer lock: ``fcntl.flock`` on a sidecar file ``<journal>-lock``.

``flock`` locks belong to an open file description, so a second :class:`WriterLock` on the same
journal fails whether it is in another process or in this one. The lock dies with the process,
so a crashed engine never leaves a stale lock behind. The sidecar file is created 0o600 and is
never deleted (deleting it would let two writers lock two different inodes).
"""

from __future__ import annotations

import fcntl
import os

from journal.errors import JournalError, JournalLocked

__all__ = ["WriterLock", "lock_path"]


def lock_path(path: str) -> str:
    return f"{path}-lock"


class WriterLock:
    """An exclusive, non-blocking lock on one journal."""

    __slots__ = ("_fd", "path")

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock or raise :class:`JournalLocked` at once."""
        if self._fd is not None:
            return
        lpath = lock_path(self.path)
        try:
            fd = os.open(lpath, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise JournalError(f"cannot create the journal's lock file {lpath} ({exc})") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise JournalLocked(
                f"journal is in use by another writer (an engine or a writing command): {self.path}"
            ) from None
        except OSError as exc:
            os.close(fd)
            raise JournalError(f"cannot lock the journal ({exc}): {self.path}") from exc
        self._fd = fd

    def release(self) -> None:
        """Release the lock (closing the descriptor drops it). Idempotent."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)
