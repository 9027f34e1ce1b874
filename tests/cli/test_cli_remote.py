"""``schedule`` and ``cancel``: through a live engine's admin socket, into a stopped journal, and
refused (exit 4) while an engine without the socket holds the journal. ``redrive`` and
``compact`` of a live engine's journal: through its socket (``Engine(admin=True)``), exit 4
without one."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest
from live_engine import fresh_journal, procs

from journal.lock import WriterLock
from wheel_engine import Engine, Firing
from wheel_engine.cli import main
from wheel_engine.testing import VirtualClock


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, object]]:
    code, out, _ = run(capsys, *argv, "--json")
    return code, json.loads(out)


# -- a live engine in another process, through its admin socket -------------------------------


@pytest.mark.slow
def test_live_engine_through_the_socket(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    journal = fresh_journal(tmp_path / "t.db")
    db = str(journal)
    with procs.engine_process(journal, record=("orders.expire",)):
        code, timer = run_json(
            capsys, "schedule", db, "orders.expire", "--delay", "0", "--key", "o:1",
            "--payload", '{"order": "A1"}',
        )  # fmt: skip
        assert code == 0 and timer["via"] == "engine" and timer["payload"] == {"order": "A1"}
        assert procs.wait_for_line(Path(f"{db}.fired"), f"o:1#{timer['version']}")

        code, later = run_json(capsys, "schedule", db, "orders.expire", "--at", "2099-01-01T00:00Z")
        assert code == 0 and later["state"] == "PENDING" and later["due"] == 4070908800.0
        code, _, err = run(capsys, "schedule", db, "orders.typo", "--delay", "1")
        assert code == 1 and "no handler registered as 'orders.typo'" in err
        assert len(err.strip().splitlines()) == 1

        code, out, _ = run(capsys, "cancel", db, str(later["key"]), "--version", "999")
        assert code == 1 and "NOT_FOUND" in out
        code, result = run_json(capsys, "cancel", db, str(later["key"]))
        assert code == 0 and result["result"] == "CANCELED" and result["via"] == "engine"
        code, out, _ = run(capsys, "cancel", db, "o:1")
        assert code == 0 and "ALREADY_DONE" in out
        code, _ = run_json(capsys, "cancel", db, "missing")
        assert code == 1


# -- no engine: straight into the journal ------------------------------------------------------


def test_stopped_journal_is_written_and_fires_at_next_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    journal = fresh_journal(tmp_path / "t.db")
    db = str(journal)
    code, first = run_json(capsys, "schedule", db, "h", "--delay", "5", "--key", "a")
    assert code == 0 and first["via"] == "journal" and first["version"] == 1
    code, out, err = run(
        capsys, "schedule", db, "h", "--delay", "5", "--key", "c", "--payload", "[1]"
    )
    assert code == 0 and "version 2, PENDING" in out and "payload [1]" in out
    assert "fires when an engine" in err
    conflict = ["schedule", db, "h", "--delay", "1", "--key", "a", "--on-conflict"]
    code, _, err = run(capsys, *conflict, "error")
    assert code == 1 and "names a live timer" in err
    code, kept = run_json(capsys, *conflict, "keep")
    assert code == 0 and kept["version"] == 1
    code, replaced = run_json(capsys, "schedule", db, "h", "--delay", "5", "--key", "b")
    assert code == 0
    code, result = run_json(capsys, "cancel", db, "b", "--version", str(replaced["version"]))
    assert code == 0 and result["result"] == "CANCELED"

    fired: list[str] = []

    async def start_service() -> None:
        clock = VirtualClock(start=1e10)  # every due time above is long past
        engine = Engine(db, clock=clock)

        @engine.handler("h")
        async def h(firing: Firing) -> None:
            fired.append(firing.key)

        async with engine:
            await clock.advance(1)

    asyncio.run(start_service())
    assert sorted(fired) == ["a", "c"]  # b was cancelled


def test_versions_stay_above_every_version_ever_issued(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(fresh_journal(tmp_path / "t.db"))
    for n in range(3):
        assert run(capsys, "schedule", db, "h", "--delay", "9", "--key", f"k{n}")[0] == 0
        assert run(capsys, "cancel", db, f"k{n}")[0] == 0
    assert run(capsys, "compact", db)[0] == 0  # the cancelled timers may be dropped
    code, timer = run_json(capsys, "schedule", db, "h", "--delay", "9")
    assert code == 0 and timer["version"] == 4
    assert str(timer["key"]).startswith("cli-")


def test_unknown_handler_is_written_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(fresh_journal(tmp_path / "t.db"))
    code, _, err = run(capsys, "schedule", db, "never.registered", "--delay", "1")
    assert code == 0 and "no timer in this journal uses handler 'never.registered'" in err


def test_stale_socket_falls_back_to_the_journal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import socket

    db = str(fresh_journal(tmp_path / "t.db"))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(db + "-admin.sock")
    sock.close()  # a killed engine's leftover
    code, timer = run_json(capsys, "schedule", db, "h", "--delay", "1")
    assert code == 0 and timer["via"] == "journal"


# -- an engine without the admin socket ---------------------------------------------------------


@pytest.mark.parametrize("argv", [["schedule", "h", "--delay", "1"], ["cancel", "k"]])
def test_locked_journal_without_socket_exits_4(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    db = str(fresh_journal(tmp_path / "t.db"))
    lock = WriterLock(db)  # what a running engine holds
    lock.acquire()
    try:
        code, out, err = run(capsys, argv[0], db, *argv[1:])
    finally:
        lock.release()
    assert code == 4 and out == ""
    assert len(err.strip().splitlines()) == 1 and "Engine(..., admin=True)" in err


@pytest.mark.slow
def test_live_engine_without_socket_exits_4(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    journal = fresh_journal(tmp_path / "t.db")
    with procs.engine_process(journal, admin=False):
        code, _, err = run(capsys, "schedule", str(journal), "h", "--delay", "1")
    assert code == 4 and "admin=True" in err and "Traceback" not in err


# -- redrive and compact of a live engine's journal -------------------------------------------

LIVE_HANDLERS = {"record": ("ok", "mail"), "fail": ("bad", "flaky")}  # conftest's journal_file


def listed(capsys: pytest.CaptureFixture[str], db: str) -> dict[str, dict[str, object]]:
    code, data = run_json(capsys, "list", db, "--limit", "0")
    assert code == 0
    return {t["key"]: t for t in data["timers"]}  # type: ignore[attr-defined]


@pytest.mark.slow
def test_redrive_and_compact_go_through_the_live_engine_s_socket(
    journal_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(journal_file)
    before = listed(capsys, db)
    assert before["dead:bad"]["state"] == "DEAD"
    with procs.engine_process(journal_file, **LIVE_HANDLERS):  # Engine(journal, admin=True)
        code, answer = run_json(capsys, "redrive", db, "dead:bad", "--at", "2099-01-01T00:00Z")
        assert code == 0 and answer["redriven"] == 1
        after = listed(capsys, db)  # what the live engine committed
        assert after["dead:bad"]["state"] == "PENDING"
        assert after["dead:bad"]["version"] > before["dead:bad"]["version"]  # type: ignore[operator]

        code, compacted = run_json(capsys, "compact", db)
        assert code == 0 and compacted["live"] is True
        code, status = run_json(capsys, "status", db)
        assert code == 0 and status["tail_records"] == 0
    assert listed(capsys, db)["dead:bad"]["state"] == "PENDING"  # kept after the engine stopped


@pytest.mark.slow
def test_redrive_and_compact_of_a_live_engine_without_socket_exit_4(
    journal_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(journal_file)
    with procs.engine_process(journal_file, admin=False, **LIVE_HANDLERS):
        code, _, err = run(capsys, "redrive", db, "dead:bad")
        assert code == 4 and "Traceback" not in err
        code, _, err = run(capsys, "compact", db)
        assert code == 4 and "Traceback" not in err
        assert listed(capsys, db)["dead:bad"]["state"] == "DEAD"


# -- arguments and files -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--at", "nan"], "not a time"),
        (["--at", "inf"], "not a time"),
        (["--at", "-5"], "not a time"),
        (["--at", "1e300"], "after the year 9999"),
        (["--at", "2026-01-01T00:00:00"], "give a time zone"),
        (["--at", "tomorrow"], "ISO 8601 with a zone"),
        (["--delay", "-1"], ">= 0"),
        (["--delay", "soon"], "number of seconds"),
        (["--delay", "1e400"], ">= 0"),
        ([], "exactly one of --at"),
        (["--at", "1", "--delay", "1"], "exactly one of --at"),
        (["--delay", "1", "--payload", "{oops"], "--payload must be JSON"),
        (["--delay", "1", "--payload", "NaN"], "--payload must be JSON"),
        (["--delay", "1", "--on-conflict", "merge"], "one of replace, keep, error"),
        (["--delay", "1", "--key", ""], "must not be empty"),
    ],
)
def test_bad_schedule_arguments_exit_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], says: str
) -> None:
    db = str(fresh_journal(tmp_path / "t.db"))
    before = Path(db).read_bytes()
    code, out, err = run(capsys, "schedule", db, "h", *argv)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and says in err, err
    assert "Error" not in err and "Traceback" not in err
    assert Path(db).read_bytes() == before


def test_bad_cancel_version_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(fresh_journal(tmp_path / "t.db"))
    code, _, err = run(capsys, "cancel", db, "k", "--version", "x")
    assert code == 2 and "--version" in err


def _foreign_sqlite(path: Path) -> None:
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()


@pytest.mark.parametrize("kind", ["empty", "text", "foreign", "missing"])
@pytest.mark.parametrize("argv", [["schedule", "h", "--delay", "1"], ["cancel", "k"]])
def test_never_turns_a_file_into_a_journal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, argv: list[str]
) -> None:
    target = tmp_path / "file.db"
    if kind == "empty":
        target.write_bytes(b"")
    elif kind == "text":
        target.write_text("hello\n")
    elif kind == "foreign":
        _foreign_sqlite(target)
    before = target.read_bytes() if target.exists() else None
    code, out, err = run(capsys, argv[0], str(target), *argv[1:])
    assert code == 3 and out == "" and len(err.strip().splitlines()) == 1
    assert (target.read_bytes() if target.exists() else None) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ([] if before is None else ["file.db"])
