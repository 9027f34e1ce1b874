"""Hostile files beside and inside a journal (SPEC guarantee 11: "Hostile files and clients").

Another local user plants links and FIFOs at the journal's own file names in a shared sticky
folder (real second user, real folder); a journal carries schema objects the engine did not
create; a FIFO or a foreign database is given as the journal. Each is refused at once, with one
clear error, and nothing outside the journal is created, written or chmod-ed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sqlite3
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hostile_user import User, second_user, sticky_folder

from journal import Journal, JournalCorrupt, JournalError, Schedule
from wheel_engine.admin import AdminError, admin_path, request
from wheel_engine.cli import main

ROOT = Path(__file__).resolve().parents[2]
#: A hang is the failure these tests look for: each CLI run must end well within this.
HANG = 20.0


@pytest.fixture
def intruder() -> Iterator[User]:
    with second_user() as user:
        yield user


@pytest.fixture
def shared() -> Iterator[Path]:
    with sticky_folder() as folder:
        yield folder


def cli(*argv: str) -> subprocess.CompletedProcess[str]:
    """The CLI in a child process: a hang fails the test (TimeoutExpired) instead of the run."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.run(
        [sys.executable, "-m", "wheel_engine.cli", *argv],
        capture_output=True,
        text=True,
        timeout=HANG,
        env=env,
    )


async def _write_journal(path: Path) -> None:
    journal = await Journal.open(path)
    try:
        await journal.submit([Schedule("k", 1, "h", time.time() + 3600, None, time.time())])
    finally:
        await journal.close()


def make_journal(path: Path, *, keep_sidecars: bool = False) -> None:
    """A journal with one pending timer ``k``; its -hwm and -shm removed unless asked (as a
    journal copied elsewhere has none: the names are free for a plant)."""
    asyncio.run(_write_journal(path))
    if not keep_sidecars:
        for suffix in ("-hwm", "-shm", "-wal"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A file of root's that a planted link points at: it must stay exactly as it is."""
    path = tmp_path / "victim"
    path.write_bytes(b"precious")
    os.chmod(path, 0o644)
    return path


def untouched(victim: Path) -> bool:
    st = victim.stat()
    return victim.read_bytes() == b"precious" and stat.S_IMODE(st.st_mode) == 0o644


# -- item 1: planted links and FIFOs at the sidecars ---------------------------------------------


def test_link_planted_at_hwm_is_refused_by_the_engine_and_the_cli(
    shared: Path, intruder: User, victim: Path
) -> None:
    db = shared / "timers.db"
    intruder.run(lambda: os.symlink(victim, f"{db}-hwm"))
    with pytest.raises(JournalError, match="symbolic link"):
        asyncio.run(Journal.open(db))  # a new journal: the mark would be created through it
    assert untouched(victim)

    os.unlink(f"{db}-hwm")
    make_journal(db)
    intruder.run(lambda: os.symlink(victim, f"{db}-hwm"))
    done = cli("cancel", str(db), "k")
    assert done.returncode == 3, done.stderr
    assert "symbolic link" in done.stderr and len(done.stderr.splitlines()) == 1
    assert untouched(victim)
    assert os.path.islink(f"{db}-hwm")  # refused, not removed: it is not ours


def test_link_planted_at_shm_is_never_chmodded(shared: Path, intruder: User, victim: Path) -> None:
    db = shared / "timers.db"
    intruder.run(lambda: os.symlink(victim, f"{db}-shm"))
    with pytest.raises(JournalError, match="symbolic link"):
        asyncio.run(Journal.open(db))
    assert untouched(victim)
    os.unlink(f"{db}-shm")
    make_journal(db)
    intruder.run(lambda: os.symlink(victim, f"{db}-shm"))
    for command in ("status", "cancel"):
        done = cli(command, str(db), *(["k"] if command == "cancel" else []))
        assert done.returncode == 3, done.stderr
        assert "symbolic link" in done.stderr
    assert untouched(victim)


def test_fifo_planted_at_hwm_is_refused_at_once(shared: Path, intruder: User) -> None:
    db = shared / "timers.db"
    make_journal(db)
    intruder.run(lambda: os.mkfifo(f"{db}-hwm", 0o666))
    for argv in (("status", str(db)), ("check", str(db)), ("cancel", str(db), "k")):
        done = cli(*argv)  # on a FIFO, open() would wait for a writer forever
        assert done.returncode in (1, 3), (argv, done.stderr)
        assert "a FIFO" in done.stderr + done.stdout
    with pytest.raises(JournalError, match="a FIFO"):
        asyncio.run(asyncio.wait_for(Journal.open(db), HANG))


def test_file_of_another_user_at_hwm_is_not_trusted(shared: Path, intruder: User) -> None:
    db = shared / "timers.db"
    make_journal(db)

    def plant() -> None:
        with open(f"{db}-hwm", "wb") as f:
            f.write(b"")  # an empty mark: "no mark yet", the lost-tail check switched off

    intruder.run(plant)
    with pytest.raises(JournalError, match=f"uid {intruder.uid}"):
        asyncio.run(Journal.open(db))


def test_fifo_given_as_the_journal_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "timers.db"
    os.mkfifo(fifo)
    for argv in (("status",), ("check",), ("cancel", "k"), ("schedule", "h", "--delay", "5")):
        command, *rest = argv
        done = cli(command, str(fifo), *rest)
        assert done.returncode == 3, (argv, done.stderr)
        assert "FIFO" in done.stderr and len(done.stderr.splitlines()) == 1
    with pytest.raises(JournalError, match="FIFO"):
        asyncio.run(asyncio.wait_for(Journal.open(fifo), HANG))


# -- item 2: a link planted at the admin socket -------------------------------------------------


class OtherService:
    """Another root service's Unix socket: records whatever reaches it, answers nothing."""

    def __init__(self, path: Path) -> None:
        self.received = b""
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(str(path))
        self._sock.listen(4)
        self._sock.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(1.0)
                with contextlib.suppress(OSError):
                    self.received += conn.recv(65536)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self._sock.close()


def test_link_planted_at_the_admin_socket_is_not_followed(
    shared: Path, intruder: User, tmp_path: Path
) -> None:
    db = shared / "timers.db"
    make_journal(db)
    service = OtherService(tmp_path / "other.sock")  # root's, like the journal: same owner
    try:
        intruder.run(lambda: os.symlink(tmp_path / "other.sock", admin_path(db)))
        done = cli("cancel", str(db), "k")
        assert done.returncode == 3, done.stderr
        assert "symbolic link" in done.stderr
        with pytest.raises(AdminError, match="symbolic link"):
            request(admin_path(db), "ping", owner=os.getuid(), timeout=2.0)
    finally:
        service.close()
    assert service.received == b""


# -- item 7: schema objects the engine did not create ---------------------------------------------

EXTRA_OBJECTS = {
    "trigger": "CREATE TRIGGER t AFTER INSERT ON records "
    "BEGIN INSERT OR REPLACE INTO meta VALUES('pwned', 1); END",
    "view": "CREATE VIEW v AS SELECT * FROM records",
    "index": "CREATE INDEX ix ON records (abs(kind))",
}


def _sql(db: Path, *statements: str) -> None:
    con = sqlite3.connect(db)
    try:
        for statement in statements:
            con.execute(statement)
        con.commit()
    finally:
        con.close()


def _pwned(db: Path) -> bool:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return bool(con.execute("SELECT count(*) FROM meta WHERE name = 'pwned'").fetchone()[0])
    finally:
        con.close()


@pytest.mark.parametrize("kind", sorted(EXTRA_OBJECTS))
def test_extra_schema_object_is_refused_by_name(
    tmp_path: Path, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "timers.db"
    make_journal(db, keep_sidecars=True)
    _sql(db, EXTRA_OBJECTS[kind])
    for readonly in (False, True):
        with pytest.raises(JournalCorrupt, match=f"{kind} '"):
            asyncio.run(Journal.open(db, readonly=readonly))
    assert main(["check", str(db)]) == 3  # refused as the engine refuses it, by name
    assert f"{kind} '" in capsys.readouterr().err


def test_trigger_never_runs_from_any_writing_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "timers.db"
    make_journal(db, keep_sidecars=True)
    _sql(db, EXTRA_OBJECTS["trigger"])
    for argv in (
        ["schedule", str(db), "h", "--delay", "60"],
        ["cancel", str(db), "k"],
        ["compact", str(db)],
        ["redrive", str(db), "--all-dead"],
    ):
        assert main(argv) == 3, argv
        err = capsys.readouterr().err
        assert "trigger 't'" in err and len(err.splitlines()) == 1, err
    assert not _pwned(db)


def test_table_altered_with_a_check_constraint_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "timers.db"
    make_journal(db, keep_sidecars=True)
    altered = (
        "CREATE TABLE records (seq INTEGER PRIMARY KEY, kind INTEGER NOT NULL "
        "CHECK (nosuchfunction(kind)), body BLOB NOT NULL)"
    )
    _sql(
        db,
        "PRAGMA writable_schema = ON",
        f"UPDATE sqlite_master SET sql = '{altered}' WHERE name = 'records'",
    )
    assert main(["check", str(db)]) == 3
    assert "table 'records'" in capsys.readouterr().err
    assert main(["schedule", str(db), "h", "--delay", "60"]) == 3
    assert "table 'records'" in capsys.readouterr().err


# -- item 8: a foreign database, read-only, leaves nothing beside it ------------------------------


@pytest.mark.parametrize("command", ["status", "list", "check", "show"])
def test_foreign_wal_database_gets_no_sidecars(tmp_path: Path, command: str) -> None:
    other = tmp_path / "app.db"
    _sql(other, "PRAGMA journal_mode = WAL", "CREATE TABLE users (name TEXT)")
    assert not os.path.exists(f"{other}-wal")  # the last close removed them
    argv = [command, str(other), *(["someone"] if command == "show" else [])]
    assert main(argv) == 3
    assert sorted(os.listdir(tmp_path)) == ["app.db"]
