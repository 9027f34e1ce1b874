"""The single-writer lock follows the file, not its name (SPEC guarantee 8, issue 8 item 4)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from journal import Journal, JournalLocked
from journal.lock import WriterLock
from journal.records import Schedule
from wheel_engine import Engine

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}

#: A child that takes the lock on argv[1], says so, and holds it until its stdin closes.
HOLDER = textwrap.dedent(
    """
    import sys
    from journal.lock import WriterLock
    lock = WriterLock(sys.argv[1])
    lock.acquire()
    print("locked", flush=True)
    sys.stdin.read()
    """
)

#: A child that tries the lock on argv[1] and prints what happened.
PROBE = textwrap.dedent(
    """
    import sys
    from journal import JournalLocked
    from journal.lock import WriterLock
    try:
        WriterLock(sys.argv[1]).acquire()
    except JournalLocked:
        print("LOCKED")
    else:
        print("ACQUIRED")
    """
)


def other_names(tmp_path: Path, target: Path) -> dict[str, Callable[[], str]]:
    """Ways to reach ``target`` other than its own path, each made when called."""

    def relative() -> str:
        os.chdir(target.parent)
        return f"./{target.name}"

    def dotdot() -> str:
        sub = tmp_path / "sub"
        sub.mkdir(exist_ok=True)
        return str(sub / ".." / target.name)

    def symlink() -> str:
        link = tmp_path / "link.db"
        link.symlink_to(target)
        return str(link)

    def hardlink() -> str:
        link = tmp_path / "hard.db"
        os.link(target, link)
        return str(link)

    return {"relative": relative, "dotdot": dotdot, "symlink": symlink, "hardlink": hardlink}


NAMES = ["relative", "dotdot", "symlink", "hardlink"]


@pytest.fixture
def journal_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # the "relative" name changes directory; undo it
    return tmp_path / "timers.db"


def probe(path: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, path],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=30,
        check=True,
    )
    return done.stdout.strip()


@contextmanager
def held_elsewhere(path: str) -> Iterator[subprocess.Popen[str]]:
    """Another process holding the lock on ``path`` for the duration of the block."""
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, path],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "locked"
        yield child
    finally:
        if child.stdin is not None:
            child.stdin.close()
        child.wait(timeout=30)


@pytest.mark.parametrize("name", NAMES)
async def test_second_engine_through_another_name_is_locked(
    tmp_path: Path, journal_path: Path, name: str
) -> None:
    first = Engine(str(journal_path))
    first.register("h", lambda firing: None)
    async with first:
        await first.schedule("h", delay=3600, key="k")
        second = Engine(other_names(tmp_path, journal_path)[name]())
        with pytest.raises(JournalLocked):
            await second.start()
        with pytest.raises(JournalLocked):
            await Journal.open(other_names(tmp_path, journal_path)["dotdot"]())
        assert first.get("k") is not None
    again = Engine(str(journal_path))  # the first engine's close released it
    again.register("h", lambda firing: None)
    async with again:
        info = again.get("k")
        assert info is not None and info.version == 1


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_lock_held_by_another_process_refuses_every_name(
    tmp_path: Path, journal_path: Path, name: str
) -> None:
    with held_elsewhere(str(journal_path)), pytest.raises(JournalLocked):
        WriterLock(other_names(tmp_path, journal_path)[name]()).acquire()
    lock = WriterLock(str(journal_path))  # gone with the holder
    lock.acquire()
    lock.release()


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
async def test_engine_here_refuses_another_process_through_every_name(
    tmp_path: Path, journal_path: Path, name: str
) -> None:
    engine = Engine(str(journal_path))
    async with engine:
        assert probe(os.path.abspath(other_names(tmp_path, journal_path)[name]())) == "LOCKED"
    assert probe(str(journal_path)) == "ACQUIRED"


@pytest.mark.slow
def test_lock_dies_with_a_killed_process(journal_path: Path) -> None:
    with held_elsewhere(str(journal_path)) as child:
        child.kill()
        child.wait(timeout=30)
        lock = WriterLock(str(journal_path))
        lock.acquire()
        lock.release()


def test_no_sidecar_lock_file(journal_path: Path) -> None:
    lock = WriterLock(str(journal_path))
    lock.acquire()
    lock.release()
    assert sorted(p.name for p in journal_path.parent.iterdir()) == ["timers.db"]


def test_a_stale_lock_file_of_old_versions_is_ignored(journal_path: Path) -> None:
    stale = journal_path.parent / "timers.db-lock"
    stale.write_bytes(b"")
    lock = WriterLock(str(journal_path))
    lock.acquire()
    lock.release()
    assert stale.read_bytes() == b""


@pytest.mark.slow
async def test_sqlite_closing_its_descriptors_keeps_the_lock(journal_path: Path) -> None:
    """SQLite's POSIX locks and closes never touch the flock: it holds through a writer's life."""
    j = await Journal.open(journal_path)
    try:
        for _ in range(3):  # connections opened and closed in this process, as reads do
            con = sqlite3.connect(journal_path)
            con.execute("SELECT count(*) FROM records").fetchone()
            con.close()
        await j.submit([Schedule("k", 1, "h", 1.0, None, 1.0)])
        assert (await j.recover()).timers.keys() == {"k"}  # a read connection, opened and closed
        assert probe(str(journal_path)) == "LOCKED"
    finally:
        await j.close()


@pytest.mark.slow
def test_flock_does_not_block_sqlite_in_another_process(journal_path: Path) -> None:
    """flock and SQLite's fcntl locks are separate kinds: a held lock leaves SQLite alone."""
    lock = WriterLock(str(journal_path))
    lock.acquire()
    try:
        script = (
            "import sqlite3, sys; con = sqlite3.connect(sys.argv[1], isolation_level=None); "
            "con.execute('BEGIN EXCLUSIVE'); con.execute('CREATE TABLE t (x)'); "
            "con.execute('COMMIT'); print('wrote')"
        )
        done = subprocess.run(
            [sys.executable, "-c", script, str(journal_path)],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        assert done.stdout.strip() == "wrote"
    finally:
        lock.release()


@pytest.mark.slow
def test_refused_attempts_reuse_one_descriptor(journal_path: Path) -> None:
    """Refused descriptors are kept (closing one would drop this process's SQLite locks on the
    file) but reused: retrying never opens more than one."""
    journal_path.write_bytes(b"")
    fds = Path("/proc/self/fd")
    with held_elsewhere(str(journal_path)):
        before = len(list(fds.iterdir()))
        for _ in range(20):
            with pytest.raises(JournalLocked):
                WriterLock(str(journal_path)).acquire()
        assert len(list(fds.iterdir())) - before <= 1
    lock = WriterLock(str(journal_path))  # and the kept descriptor takes the lock once free
    lock.acquire()
    assert len(list(fds.iterdir())) - before <= 1
    lock.release()


def test_release_is_idempotent_and_acquire_reentrant(journal_path: Path) -> None:
    lock = WriterLock(str(journal_path))
    lock.acquire()
    lock.acquire()
    assert lock.held
    lock.release()
    lock.release()
    assert not lock.held


#: A child that tries an exclusive SQLite lock on argv[1] at once and prints what happened.
SQLITE_EXCLUSIVE = (
    "import sqlite3, sys\n"
    "con = sqlite3.connect(sys.argv[1], timeout=0, isolation_level=None)\n"
    "try:\n"
    "    con.execute('BEGIN EXCLUSIVE')\n"
    "except sqlite3.OperationalError as exc:\n"
    "    print('BUSY', exc)\n"
    "else:\n"
    "    print('EXCLUSIVE')\n"
)


@pytest.mark.slow
def test_a_refused_attempt_keeps_this_process_s_sqlite_locks(journal_path: Path) -> None:
    """Closing any descriptor of a file drops every POSIX lock this process holds on it, and
    SQLite's locks are POSIX locks: a refused attempt must not close its descriptor."""
    con = sqlite3.connect(journal_path, isolation_level=None)
    con.execute("CREATE TABLE t (x)")
    con.execute("BEGIN")
    con.execute("SELECT count(*) FROM t").fetchone()  # a read transaction: SQLite's SHARED lock

    def other_process_tries_exclusive() -> str:
        done = subprocess.run(
            [sys.executable, "-c", SQLITE_EXCLUSIVE, str(journal_path)],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        return done.stdout.strip()

    try:
        assert other_process_tries_exclusive().startswith("BUSY")
        with held_elsewhere(str(journal_path)), pytest.raises(JournalLocked):
            WriterLock(str(journal_path)).acquire()
        assert other_process_tries_exclusive().startswith("BUSY")  # our read lock still holds
    finally:
        con.execute("COMMIT")
        con.close()
