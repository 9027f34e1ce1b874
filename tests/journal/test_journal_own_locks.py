"""Looking at a journal never drops this process's own locks on it.

POSIX drops every lock a process holds on a file when that process closes *any* descriptor of
the file. SQLite holds such locks on the journal for as long as a connection reads it (in WAL
mode, a shared lock on the main file): a check that opened and closed the journal itself,
while the engine ran in the same process (a compaction, a console mounted in the service, the
CLI's helpers), would drop them behind SQLite's back. The checks read through SQLite alone.
"""

from __future__ import annotations

import os
import sqlite3
import sys
from pathlib import Path

import pytest

from journal.schema import check_header, connect_ro
from wheel_engine import Engine
from wheel_engine.cli.common import existing_journal

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/locks")


def own_locks(path: Path) -> list[str]:
    """This process's POSIX locks on ``path``'s inode, from /proc/locks (not the journal's
    flock, which closing a descriptor does not drop)."""
    inode, pid = os.stat(path).st_ino, str(os.getpid())
    found = []
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if fields[1] == "->":  # a waiter's line
            continue
        if fields[1] == "POSIX" and fields[4] == pid and int(fields[5].rsplit(":", 1)[1]) == inode:
            found.append(" ".join(fields[1:4] + fields[6:]))
    return found


async def test_checks_and_read_only_opens_keep_the_running_engines_locks(tmp_path: Path) -> None:
    path = tmp_path / "timers.db"
    async with Engine(str(path)) as engine:
        engine.register("h", lambda firing: None)
        await engine.schedule("h", delay=60, key="k")
        reader = sqlite3.connect(path)  # a connection in a read: SQLite's shared lock is held
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM records").fetchone()
        held = own_locks(path)
        # SQLite counts its locks per file and process: if the engine's start had dropped the
        # lock its connections took, this read would not take it again, and none would show.
        assert held, "SQLite's shared lock on the journal is gone: a descriptor of it was closed"
        check_header(str(path))
        assert own_locks(path) == held
        existing_journal(str(path))
        assert own_locks(path) == held
        connect_ro(str(path)).close()
        assert own_locks(path) == held
        await engine.compact()  # reads through connect_ro inside the engine's process
        assert own_locks(path) == held
        reader.rollback()
        reader.close()


@pytest.mark.parametrize(
    "content", [b"x" * 50, b"SQLite format 3\x00" + b"z" * 84, b"hello\n" * 200]
)
def test_a_file_that_is_no_database_is_still_refused(tmp_path: Path, content: bytes) -> None:
    from journal.errors import JournalError

    path = tmp_path / "foreign.db"
    path.write_bytes(content)
    with pytest.raises(JournalError, match="not a wheel-engine journal"):
        check_header(str(path))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["foreign.db"]  # no sidecar left
