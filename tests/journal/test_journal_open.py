"""Opening: creation and file modes, the writer lock, read-only opens, foreign and damaged files."""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from journal import Journal, JournalCorrupt, JournalError, JournalLocked
from journal.records import Schedule
from journal.schema import APPLICATION_ID, check_header

ROOT = Path(__file__).resolve().parents[2]


def mode(path: str) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


async def test_creates_file_and_wal_with_mode_600_and_no_lock_file(db: str) -> None:
    old = os.umask(0o022)
    try:
        j = await Journal.open(db)
        await j.submit([Schedule("k", 1, "h", 1.0, None, 1.0)])
        for suffix in ("", "-wal", "-shm"):
            assert os.path.exists(db + suffix), suffix
            assert mode(db + suffix) == 0o600, suffix
        assert not os.path.exists(db + "-lock")  # the lock is on the journal file itself
        await j.close()
    finally:
        os.umask(old)
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert con.execute("SELECT value FROM meta WHERE name = 'schema_version'").fetchone()[0] == 2
    con.close()


async def test_synchronous_follows_durability(db: str) -> None:
    for durability, level in (("full", 2), ("normal", 1)):
        j = await Journal.open(db, durability=durability)  # type: ignore[arg-type]
        cur = await j._conn.execute("PRAGMA synchronous")
        assert (await cur.fetchone())[0] == level
        await j.close()
    with pytest.raises(ValueError):
        await Journal.open(db, durability="fast")  # type: ignore[arg-type]


async def test_second_writer_in_same_process_is_locked(db: str) -> None:
    j = await Journal.open(db)
    with pytest.raises(JournalLocked) as info:
        await Journal.open(db)
    assert db in str(info.value)
    ro = await Journal.open(db, readonly=True)  # readers need no lock
    await j.submit([Schedule("k", 1, "h", 1.0, None, 1.0)])
    assert sorted((await ro.recover()).timers) == ["k"]
    await ro.close()
    await j.close()
    again = await Journal.open(db)  # released on close
    await again.close()


@pytest.mark.slow
async def test_second_writer_in_another_process_is_locked(db: str) -> None:
    script = textwrap.dedent(
        """
        import asyncio, sys
        from journal import Journal, JournalLocked
        async def main():
            try:
                j = await Journal.open(sys.argv[1])
            except JournalLocked as exc:
                print("LOCKED", exc)
                return
            await j.close()
            print("OPENED")
        asyncio.run(main())
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def run() -> str:
        out = subprocess.run(
            [sys.executable, "-c", script, db],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=True,
        )
        return out.stdout

    j = await Journal.open(db)
    out = run()
    assert out.startswith("LOCKED") and db in out
    await j.close()
    assert run().startswith("OPENED")


async def test_readonly_missing_file(db: str) -> None:
    with pytest.raises(JournalError, match="no such journal"):
        await Journal.open(db, readonly=True)
    assert not os.path.exists(db)


async def test_random_bytes_are_not_a_journal(db: str) -> None:
    Path(db).write_bytes(os.urandom(4096))
    for readonly in (False, True):
        with pytest.raises(JournalError, match="not a wheel-engine journal") as info:
            await Journal.open(db, readonly=readonly)
        assert db in str(info.value)
        assert not isinstance(info.value, JournalLocked)
    # a failed open releases the lock
    Path(db).unlink()
    j = await Journal.open(db)
    await j.close()


async def test_sqlite_db_with_other_tables_is_not_a_journal(db: str) -> None:
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    con.execute("INSERT INTO users VALUES (1, 'x')")
    con.commit()
    con.close()
    for readonly in (False, True):
        with pytest.raises(JournalError, match=f"not a wheel-engine journal: {db}"):
            await Journal.open(db, readonly=readonly)
    con = sqlite3.connect(db)  # untouched
    assert con.execute("SELECT name FROM users").fetchall() == [("x",)]
    con.close()


async def test_sqlite_db_without_tables_is_not_a_journal(db: str) -> None:
    con = sqlite3.connect(db)
    con.execute("PRAGMA user_version = 7")  # writes the header: a valid, empty SQLite file
    con.close()
    assert os.path.getsize(db) > 0
    for readonly in (False, True):
        with pytest.raises(JournalError, match="not a wheel-engine journal"):
            await Journal.open(db, readonly=readonly)


async def test_newer_schema_is_refused(db: str) -> None:
    j = await Journal.open(db)
    await j.close()
    con = sqlite3.connect(db)
    con.execute("UPDATE meta SET value = 99 WHERE name = 'schema_version'")
    con.commit()
    con.close()
    for readonly in (False, True):
        with pytest.raises(JournalError, match="written by a newer wheel-engine"):
            await Journal.open(db, readonly=readonly)


async def test_empty_existing_file_becomes_a_journal(db: str) -> None:
    Path(db).touch(mode=0o600)
    j = await Journal.open(db)
    assert (await j.recover()).timers == {}
    await j.close()


async def _big_journal(db: str) -> None:
    j = await Journal.open(db)
    recs = [Schedule(f"key-{i}", i + 1, "h", 1.0, b"p" * 100, 1.0) for i in range(5000)]
    await j.submit(recs)
    await j.close()


async def test_truncated_database_raises_journal_errors_only(db: str) -> None:
    await _big_journal(db)
    size = os.path.getsize(db)
    with open(db, "r+b") as f:
        f.truncate(size // 2)
    for readonly in (True, False):
        with pytest.raises(JournalError) as info:
            j = await Journal.open(db, readonly=readonly)
            try:
                await j.recover()
            finally:
                await j.close()
        assert db in str(info.value)
        assert not isinstance(info.value, sqlite3.Error)


async def test_malformed_pages_raise_journal_corrupt(db: str) -> None:
    await _big_journal(db)
    size = os.path.getsize(db)
    with open(db, "r+b") as f:
        for offset in range(4096 * 2, size - 4096, 4096 * 3):  # smash some b-tree pages
            f.seek(offset)
            f.write(b"\xff" * 64)
    with pytest.raises(JournalError) as info:
        j = await Journal.open(db, readonly=True)
        try:
            await j.recover()
        finally:
            await j.close()
    assert isinstance(info.value, JournalCorrupt)
    assert "malformed" in str(info.value)
    assert db in str(info.value)


async def test_open_accepts_pathlike_and_repr(tmp_path: Path) -> None:
    j = await Journal.open(tmp_path / "p.db", durability="normal")
    assert j.path == str(tmp_path / "p.db")
    assert "normal" in repr(j) and "open" in repr(j)
    await j.close()
    assert "closed" in repr(j)


@pytest.mark.parametrize("bad", ["", ":memory:", "file:x.db?mode=memory"])
async def test_path_must_be_a_file_path(bad: str, tmp_path: Path) -> None:
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        with pytest.raises(ValueError):
            await Journal.open(bad)
        assert os.listdir(tmp_path) == []  # no lock file, no database left behind
    finally:
        os.chdir(cwd)


async def test_check_and_info_on_a_healthy_journal(db: str) -> None:
    j = await Journal.open(db)
    await j.submit([Schedule(f"k{i}", i + 1, "h", 1.0, None, 1.0) for i in range(10)])
    await j.compact(retention=0.0, now=0.0)
    await j.submit([Schedule("late", 11, "h", 1.0, None, 1.0)])
    report = await j.check()
    assert report.ok and (report.snapshot_rows, report.records) == (10, 1)
    info = await j.info()
    assert (info.snapshot_seq, info.last_seq, info.tail_records) == (10, 11, 1)
    assert (info.snapshot_rows, info.max_version, info.schema_version) == (10, 10, 2)
    assert info.file_bytes > 0
    await j.close()


@pytest.mark.parametrize("ours", [True, False])
async def test_a_journal_whose_newest_pages_are_in_its_wal_is_told_apart(
    db: str, ours: bool
) -> None:
    """A journal in use keeps its newest pages in the WAL, and a checkpoint rewrites the main
    file under a reader: recognising the journal from the main file alone said "not a
    wheel-engine journal" beside a running engine (the hostile-clients test caught it). Here
    the application id is in the WAL only, held there by a connection that never
    checkpoints; a database that is not ours is still refused."""
    con = sqlite3.connect(db)
    try:
        con.execute("PRAGMA journal_mode = WAL")
        con.execute("PRAGMA wal_autocheckpoint = 0")
        con.execute(f"PRAGMA application_id = {APPLICATION_ID if ours else 1234}")
        assert os.path.getsize(db) > 0 and os.path.getsize(db + "-wal") > 0
        if ours:
            check_header(db)
        else:
            with pytest.raises(JournalError, match="not a wheel-engine journal"):
                check_header(db)
    finally:
        con.close()
