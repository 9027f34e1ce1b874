"""The journal's own files beside it, opened so that nobody else's file is ever reached.

A journal ``timers.db`` has files of its own beside the real file (symbolic links resolved, as
SQLite does): ``-wal``, ``-shm`` and ``-journal`` (SQLite's), ``-hwm`` (the high-water mark,
:mod:`journal.watermark`) and ``-admin.sock`` (the admin socket, :mod:`wheel_engine.admin`). In
a folder others can write to (``/tmp``, say: mode 1777), another user can plant something at
one of those names before the engine creates it: a symbolic link to a file of the victim's (a
root engine would then create, overwrite or chmod it), a FIFO (an open or a read would wait
forever), a file of their own (whose content we would trust).

Guaranteed here, for every file of the journal's own that this code opens:

- it is opened with ``O_NOFOLLOW`` (a symbolic link is refused, never followed, never created
  through) and ``O_NONBLOCK`` (a FIFO never makes the open wait);
- the open file is then checked with ``fstat`` (the very file opened, no race): a regular file
  owned by the journal's owner (or by root), else refused with one :class:`JournalError`
  naming the path and what is wrong;
- a mode is only ever changed through such a descriptor (:func:`secure_sidecars`), never by
  name.

SQLite opens its own sidecars with ``O_NOFOLLOW`` too, but a link there makes it fail with
"unable to open database file" and a FIFO at ``-wal`` would block its read: so
:func:`refuse_planted` looks at them (``lstat``) before SQLite opens the journal, to refuse with a
clear error instead. That look and SQLite's own open are two steps: a plant in between still
meets SQLite's ``O_NOFOLLOW``, which is why a private folder stays the advice
(``docs/guide/deployment.md``).
"""

from __future__ import annotations

import errno
import os
import stat
from typing import Final

from journal.errors import JournalError

__all__ = [
    "SQLITE_SIDECARS",
    "check_own",
    "journal_owner",
    "journal_size",
    "kind_of",
    "open_own",
    "own_path",
    "refuse_planted",
    "secure_sidecars",
]

#: The files SQLite keeps beside a journal.
SQLITE_SIDECARS: Final = ("-wal", "-shm", "-journal")
#: Owner-only, as the journal itself.
OWN_MODE: Final = 0o600

_KINDS: Final = (
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def own_path(journal: str, suffix: str) -> str:
    """The journal's own file ``suffix``: beside the real file, as SQLite puts ``-wal``."""
    return os.path.realpath(journal) + suffix


def journal_owner(journal: str) -> int | None:
    """The uid owning the journal file (links followed), None if there is no file yet."""
    try:
        return os.stat(journal).st_uid
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise JournalError(f"cannot read journal ({exc}): {journal}") from exc


def kind_of(mode: int) -> str:
    """What a file that is not a regular file is, for an error message."""
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def check_own(st: os.stat_result, path: str, owner: int | None) -> None:
    """Raise :class:`JournalError` unless ``st`` is a regular file of ``owner`` (or root)."""
    if not stat.S_ISREG(st.st_mode):
        raise JournalError(
            f"{path} is {kind_of(st.st_mode)}, not one of the journal's own files: "
            "refusing it (remove it if nothing else needs it)"
        )
    if owner is not None and st.st_uid not in (owner, 0):
        raise JournalError(
            f"{path} belongs to uid {st.st_uid}, not to the journal's owner (uid {owner}): "
            "refusing it (remove it if nothing else needs it)"
        )


def open_own(path: str, flags: int, owner: int | None) -> int:
    """A descriptor on the journal's own file ``path`` (see the module docstring).

    ``flags`` may include ``O_CREAT`` (mode 0o600). Raises ``FileNotFoundError`` when there is
    no file and ``O_CREAT`` is not given, :class:`JournalError` for a link, a FIFO, a device, a
    directory or another user's file, and ``OSError`` for anything else. A file created here by
    root beside another user's journal is given to that user, as SQLite does its ``-wal``.
    """
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, OWN_MODE)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise JournalError(
                f"{path} is a symbolic link, not one of the journal's own files: refusing to "
                "follow it (remove it if nothing else needs it)"
            ) from None
        raise
    try:
        st = os.fstat(fd)
        check_own(st, path, owner)
        if owner is not None and st.st_uid != owner and st.st_size == 0 and flags & os.O_CREAT:
            os.fchown(fd, owner, -1)  # root made it just now: the journal's owner must use it too
    except BaseException:
        os.close(fd)
        raise
    return fd


def journal_size(path: str) -> int:
    """The size of the journal file at ``path`` (links followed: the journal may be reached
    through one). Anything but a regular file is refused at once with :class:`JournalError` (a
    FIFO is never opened, so nothing waits on it); ``OSError`` for a file that cannot be looked
    at.

    It looks with ``stat`` and opens no descriptor: the journal file is SQLite's, and closing
    any descriptor of it drops every POSIX lock this process holds on it (SQLite's own among
    them, whatever connection took them), so only SQLite opens and closes it here.
    """
    mode = os.stat(path)
    if not stat.S_ISREG(mode.st_mode):
        raise JournalError(f"not a wheel-engine journal ({kind_of(mode.st_mode)}): {path}")
    return mode.st_size


def refuse_planted(journal: str, suffixes: tuple[str, ...] = SQLITE_SIDECARS) -> None:
    """Refuse (:class:`JournalError`) a link, FIFO, device, directory or foreign file at any of
    the journal's sidecars, before SQLite opens the journal. A missing one is fine."""
    owner = journal_owner(journal)
    for suffix in suffixes:
        side = own_path(journal, suffix)
        try:
            st = os.lstat(side)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise JournalError(f"cannot look at the journal's file {side} ({exc})") from exc
        check_own(st, side, owner)


def secure_sidecars(journal: str) -> None:
    """SQLite gives ``-wal``/``-shm`` the database file's mode; make sure of 0o600 anyway.

    Never through a link, and never by closing a real descriptor of those files: closing *any*
    descriptor of a file drops every POSIX lock this process holds on it, SQLite's included
    (its lock on ``-shm`` says "a connection uses this": without it, another process's first
    connection reinitialises the ``-shm`` under ours, which then dies of SIGBUS). So the file
    is reached with ``O_PATH | O_NOFOLLOW`` (a descriptor that holds no lock and drops none),
    checked with ``fstat``, and chmod-ed through ``/proc/self/fd``, which names that very file.
    """
    owner = journal_owner(journal)
    for suffix in ("-wal", "-shm"):
        side = own_path(journal, suffix)
        try:
            fd = os.open(side, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            continue
        try:
            st = os.fstat(fd)
            check_own(st, side, owner)
            if stat.S_IMODE(st.st_mode) & 0o077:
                os.chmod(f"/proc/self/fd/{fd}", OWN_MODE)
        finally:
            os.close(fd)
