"""compact and redrive: they take the journal's lock, and change only what they say."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from journal.lock import WriterLock
from wheel_engine import Engine, Firing
from wheel_engine.cli import main
from wheel_engine.testing import VirtualClock


def states(capsys: pytest.CaptureFixture[str], path: Path) -> dict[str, dict[str, object]]:
    assert main(["list", str(path), "--limit", "-1", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    return {t["key"]: t for t in data["timers"]}


def test_compact_keeps_the_live_state(
    journal_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = states(capsys, journal_file)
    assert main(["compact", str(journal_file), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["records_after"] < data["records_before"]
    after = states(capsys, journal_file)
    live = {k: v for k, v in before.items() if v["state"] in ("PENDING", "DEAD")}
    for key, timer in live.items():  # pending and dead timers survive, unchanged
        assert after[key]["version"] == timer["version"]
        assert after[key]["state"] == timer["state"]
        assert after[key]["due"] == timer["due"]
    assert main(["status", str(journal_file)]) == 0
    assert "folded records up to" in capsys.readouterr().out
    assert main(["compact", str(journal_file)]) == 0
    assert capsys.readouterr().out.startswith("compacted ")


@pytest.mark.parametrize("argv", [["compact"], ["redrive", "dead:bad"], ["redrive", "--all-dead"]])
def test_writing_commands_refuse_a_locked_journal(
    journal_file: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    lock = WriterLock(str(journal_file))  # what a running engine holds
    lock.acquire()
    try:
        assert main([argv[0], str(journal_file), *argv[1:]]) == 4
    finally:
        lock.release()
    err = capsys.readouterr().err
    assert "in use by a running engine" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert states(capsys, journal_file)["dead:bad"]["state"] == "DEAD"  # untouched


def test_redrive_one_key(journal_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = states(capsys, journal_file)["dead:bad"]
    assert main(["redrive", str(journal_file), "dead:bad", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["redriven"] == 1
    now = states(capsys, journal_file)
    assert now["dead:bad"]["state"] == "PENDING"
    assert now["dead:bad"]["attempts"] == 0
    assert isinstance(old["version"], int)
    assert now["dead:bad"]["version"] > old["version"]
    assert now["dead:flaky"]["state"] == "DEAD"  # only the one asked for


def test_redrive_refuses_what_is_not_dead(
    journal_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["redrive", str(journal_file), "later:1"]) == 1
    assert "only DEAD timers" in capsys.readouterr().err
    assert main(["redrive", str(journal_file), "nope"]) == 1
    assert "no timer with key" in capsys.readouterr().err
    assert main(["redrive", str(journal_file)]) == 2
    assert main(["redrive", str(journal_file), "dead:bad", "--all-dead"]) == 2
    assert main(["redrive", str(journal_file), "dead:bad", "--handler", "bad"]) == 2
    assert main(["redrive", str(journal_file), "dead:bad", "--at", "tomorrow"]) == 2
    assert main(["redrive", str(journal_file), "dead:bad", "--at", "2030-01-01T00:00:00"]) == 2
    capsys.readouterr()
    assert states(capsys, journal_file)["dead:bad"]["state"] == "DEAD"


def test_redrive_all_dead_for_one_handler_then_all(
    journal_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["redrive", str(journal_file), "--all-dead", "--handler", "flaky"]) == 0
    assert "redriven dead:flaky" in capsys.readouterr().out
    now = states(capsys, journal_file)
    assert now["dead:flaky"]["state"] == "PENDING"
    assert now["dead:bad"]["state"] == "DEAD"

    at = "2030-01-01T00:00:00Z"
    assert main(["redrive", str(journal_file), "--all-dead", "--at", at, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["redriven"] == 1
    now = states(capsys, journal_file)
    assert now["dead:bad"]["state"] == "PENDING"
    assert now["dead:bad"]["due_utc"].startswith("2030-01-01T00:00:00")

    assert main(["redrive", str(journal_file), "--all-dead"]) == 0
    assert "no DEAD timers" in capsys.readouterr().out


def test_a_redriven_timer_fires_in_the_service(
    journal_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["redrive", str(journal_file), "dead:bad"]) == 0
    fired: list[Firing] = []

    async def service() -> None:
        clock = VirtualClock(start=time.time())
        engine = Engine(str(journal_file), clock=clock)

        @engine.handler("bad")
        async def fixed(firing: Firing) -> None:
            fired.append(firing)

        async with engine:
            await clock.advance(1)

    asyncio.run(service())
    assert [f.key for f in fired] == ["dead:bad"]
    assert fired[0].attempt == 1


def _foreign_sqlite(path: Path, *, wal: bool) -> None:
    con = sqlite3.connect(path)
    if wal:
        con.execute("PRAGMA journal_mode = WAL")
    con.execute("CREATE TABLE accounts (id INTEGER PRIMARY KEY, owner TEXT)")
    con.execute("INSERT INTO accounts (owner) VALUES ('ann')")
    con.commit()
    con.close()


FOREIGN: dict[str, Callable[[Path], None]] = {
    "empty": lambda p: p.write_bytes(b""),
    "text": lambda p: p.write_text("not a journal\n"),
    "random": lambda p: p.write_bytes(bytes(range(256)) * 16),
    "sqlite header only": lambda p: p.write_bytes(b"SQLite format 3\x00"),
    "other sqlite db": lambda p: _foreign_sqlite(p, wal=False),
    "other sqlite db in WAL mode": lambda p: _foreign_sqlite(p, wal=True),
}
WRITING = [["compact"], ["redrive", "some-key"], ["redrive", "--all-dead"]]


@pytest.mark.parametrize("kind", list(FOREIGN))
@pytest.mark.parametrize("argv", WRITING, ids=" ".join)
def test_writing_commands_leave_a_foreign_file_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, argv: list[str]
) -> None:
    path = tmp_path / "empty.db"
    FOREIGN[kind](path)
    old = 1_000_000_000  # an mtime in 2001: any write would move it
    os.utime(path, (old, old))
    content = path.read_bytes()
    assert main([argv[0], str(path), *argv[1:]]) == 3
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "empty.db" in err
    assert path.read_bytes() == content
    assert path.stat().st_mtime == old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.db"]  # no -wal, -shm, -lock


@pytest.mark.parametrize("argv", WRITING, ids=" ".join)
def test_writing_commands_create_no_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    path = tmp_path / "missing.db"
    assert main([argv[0], str(path), *argv[1:]]) == 3
    err = capsys.readouterr().err
    assert "no such file" in err and len(err.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


async def test_compact_through_a_symlink_to_a_running_engine_s_journal_is_locked(
    journal_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    link = journal_file.parent / "link.db"
    link.symlink_to(journal_file)
    engine = Engine(str(journal_file))
    async with engine:
        assert await asyncio.to_thread(main, ["compact", str(link)]) == 4
    assert "in use by a running engine" in capsys.readouterr().err
