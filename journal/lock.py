"""The single-writer lock: ``fcntl.flock`` on the journal file itself.

Guaranteed: while a :class:`WriterLock` is held, a second one on the same file fails at once
with :class:`JournalLocked`, in this process or another, however the file is reached (another
relative path, a symlink, a hard link): ``flock`` locks the open file description of an
*inode*, so every name of the file meets the same lock. The lock dies with the process, so a
crashed engine never leaves a stale lock behind, and no sidecar file is made (an old
``<journal>-lock`` file left by earlier versions is ignored).

Why it does not disturb SQLite: SQLite's unix VFS locks with POSIX ``fcntl`` record locks, and on
Linux (and the BSDs, macOS) ``flock`` locks and ``fcntl`` locks are separate kinds that never
conflict on a local file system; SQLite closing its own descriptors does not drop a ``flock``
either (``tests/journal/test_journal_lock.py`` checks both). Not covered: network file systems
that emulate ``flock`` with ``fcntl`` (NFS); SQLite's WAL mode does not work there anyway.

The one trap is the other way round: POSIX locks belong to a (process, inode) pair, and closing
*any* descriptor of the inode drops every POSIX lock the process holds on it, SQLite's included.
So this module never closes a descriptor while its process may write the file through SQLite:

- a second lock on a file this process already locks is refused from a table of file
  identities ``(st_dev, st_ino)``, before any descriptor is opened;
- a descriptor whose ``flock`` was refused (another process writes the file) is kept and reused
  by the next attempt on that file, never closed;
- :meth:`WriterLock.release` closes its descriptor; the journal calls it after closing its own
  SQLite connections.
"""

from __future__ import annotations

import fcntl
import os
import stat

from journal.errors import JournalError, JournalLocked
from journal.ownfiles import kind_of

__all__ = ["WriterLock"]

#: A file's identity: the same for every path, symlink and hard link that reaches it.
FileId = tuple[int, int]

#: The files this process holds a writer lock on, and the lock that holds each.
_held: dict[FileId, WriterLock] = {}
#: Descriptors whose lock was refused, per file: kept open (see the module docstring) and
#: reused by the next attempt, so retries never open more than one descriptor per file.
_refused: dict[FileId, list[int]] = {}


def _path_id(path: str) -> FileId | None:
    """The identity of the file ``path`` reaches now (symlinks followed), None if missing."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise JournalError(f"cannot open the journal to lock it ({exc}): {path}") from exc
    return (st.st_dev, st.st_ino)


def _take_refused(file: FileId) -> int | None:
    spare = _refused.get(file)
    if not spare:
        return None
    fd = spare.pop()
    if not spare:
        del _refused[file]
    return fd


def _fd_id(fd: int) -> FileId:
    st = os.fstat(fd)
    return (st.st_dev, st.st_ino)


class WriterLock:
    """An exclusive, non-blocking lock on one journal file (see the module docstring)."""

    __slots__ = ("_fd", "_file", "path")

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None
        self._file: FileId | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock or raise :class:`JournalLocked` at once.

        Creates the file (empty, mode 0o600) when it is missing, as a writable journal does.
        Raises :class:`JournalError` when the file cannot be opened for writing or locked.
        """
        if self._fd is not None:
            return
        known = _path_id(self.path)
        if known is not None and known in _held:
            raise self._locked()
        fd = _take_refused(known) if known is not None else None
        if fd is None:
            fd = self._open()
        file = _fd_id(fd)
        if file in _held:  # the name moved to a file this process locks since the stat above
            self._keep_refused(file, fd)
            raise self._locked()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._keep_refused(file, fd)
            raise self._locked() from None
        except OSError as exc:
            self._keep_refused(file, fd)
            raise JournalError(f"cannot lock the journal ({exc}): {self.path}") from exc
        _held[file] = self
        self._fd, self._file = fd, file

    def release(self) -> None:
        """Release the lock and close its descriptor. Idempotent.

        Call it only after this process's SQLite connections on the file are closed (see the
        module docstring).
        """
        fd, file = self._fd, self._file
        self._fd = self._file = None
        if file is not None and _held.get(file) is self:
            del _held[file]
        if fd is not None:
            os.close(fd)  # closing the only descriptor of this description drops the flock

    def _open(self) -> int:
        """The journal file, opened for the lock: a FIFO or a device there is refused at once
        (``O_NONBLOCK``: the open never waits for a FIFO's other end)."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise JournalError(f"cannot open the journal to lock it ({exc}): {self.path}") from exc
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            os.close(fd)  # not a file SQLite could hold a lock on: no lock of ours is lost
            raise JournalError(f"not a wheel-engine journal ({kind_of(mode)}): {self.path}")
        return fd

    @staticmethod
    def _keep_refused(file: FileId, fd: int) -> None:
        _refused.setdefault(file, []).append(fd)

    def _locked(self) -> JournalLocked:
        return JournalLocked(
            f"journal is in use by another writer (an engine or a writing command): {self.path}"
        )
