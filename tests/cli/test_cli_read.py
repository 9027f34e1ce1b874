"""status, list, show, check: human output, --json, and one-line errors with exit codes."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from journal.lock import WriterLock
from wheel_engine.cli import main


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, object]:
    code = main([*argv, "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out)


def test_status_counts_every_state(journal_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, data = run_json(capsys, "status", str(journal_file))
    assert code == 0
    assert isinstance(data, dict)
    assert data["states"] == {
        "PENDING": 2,
        "RUNNING": 0,
        "SUCCEEDED": 1,
        "CANCELED": 1,
        "DEAD": 2,
    }
    assert data["timers"] == 6
    assert data["records"] > 0 and data["file_bytes"] > 0
    assert data["handlers"]["flaky"]["DEAD"] == 1
    assert data["unhandled"] is None
    assert data["next_due"]["key"] == "later:1"


def test_status_reports_unhandled_against_the_given_handlers(
    journal_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, data = run_json(capsys, "status", str(journal_file), "--handlers", "ok,bad,flaky")
    assert code == 0
    assert isinstance(data, dict)
    assert data["unhandled"] == 1
    assert data["unhandled_handlers"] == ["mail"]


def test_status_human(journal_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", str(journal_file)]) == 0
    out = capsys.readouterr().out
    assert "pending" in out and "dead" in out
    assert "last compaction" in out and "never" in out
    assert "flaky" in out  # the per-handler table


def test_status_works_while_an_engine_holds_the_lock(
    journal_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lock = WriterLock(str(journal_file))
    lock.acquire()
    try:
        assert main(["status", str(journal_file)]) == 0
        assert main(["list", str(journal_file)]) == 0
        assert main(["show", str(journal_file), "done:1"]) == 0
        assert main(["check", str(journal_file)]) == 0
    finally:
        lock.release()


def test_list_filters_and_orders_by_due(
    journal_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, data = run_json(capsys, "list", str(journal_file))
    assert code == 0 and isinstance(data, dict)
    dues = [t["due"] for t in data["timers"]]
    assert dues == sorted(dues)
    assert data["total"] == 6

    code, data = run_json(capsys, "list", str(journal_file), "--state", "dead")
    assert isinstance(data, dict)
    assert sorted(t["key"] for t in data["timers"]) == ["dead:bad", "dead:flaky"]
    flaky = next(t for t in data["timers"] if t["key"] == "dead:flaky")
    assert flaky["attempts"] == 2 and "downstream unavailable" in flaky["last_error"]

    code, data = run_json(capsys, "list", str(journal_file), "--handler", "ok", "--limit", "1")
    assert isinstance(data, dict)
    assert data["total"] == 3 and data["shown"] == 1
    assert data["timers"][0]["handler"] == "ok"


def test_list_human_and_bad_state(journal_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", str(journal_file), "--state", "PENDING"]) == 0
    out = capsys.readouterr().out
    assert "later:1" in out and "mail:1" in out and "done:1" not in out
    assert main(["list", str(journal_file), "--state", "sleeping"]) == 2
    assert "unknown state" in capsys.readouterr().err


def test_show_every_field_and_history(
    journal_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, data = run_json(capsys, "show", str(journal_file), "dead:flaky")
    assert code == 0 and isinstance(data, dict)
    assert data["state"] == "DEAD" and data["handler"] == "flaky"
    assert data["payload"] == {"n": 1}
    kinds = [h["kind"] for h in data["history"]]
    assert kinds == ["SCHEDULE", "ATTEMPT", "RETRY", "ATTEMPT", "DEAD"]

    assert main(["show", str(journal_file), "dead:bad"]) == 0
    out = capsys.readouterr().out
    assert "PermanentError" in out and "B2" in out and "history" in out


def test_show_unknown_key(journal_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", str(journal_file), "no-such-key"]) == 1
    err = capsys.readouterr().err
    assert "no timer with key 'no-such-key'" in err


def test_check_ok(journal_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(journal_file)]) == 0
    assert capsys.readouterr().out.startswith("ok:")
    code, data = run_json(capsys, "check", str(journal_file))
    assert code == 0 and isinstance(data, dict) and data["ok"] is True
    assert data["timers"] == 6


def test_check_names_the_damaged_record(
    journal_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    con = sqlite3.connect(journal_file)
    seq = con.execute("SELECT min(seq) FROM records").fetchone()[0]
    con.execute("UPDATE records SET body = x'c1c1c1' WHERE seq = ?", (seq,))
    con.commit()
    con.close()
    assert main(["check", str(journal_file)]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert str(seq) in err.splitlines()[0]
    # The other reading commands refuse the damaged journal in one line too.
    assert main(["status", str(journal_file)]) == 3
    err = capsys.readouterr().err
    assert "damaged" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("command", ["status", "list", "check", "compact"])
def test_missing_file_not_a_journal_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    missing = tmp_path / "nope.db"
    assert main([command, str(missing)]) == 3
    assert "no such file" in capsys.readouterr().err
    assert not missing.exists()  # nothing was created

    text = tmp_path / "notes.txt"
    text.write_text("hello\n")
    assert main([command, str(text)]) == 3
    assert "not a wheel-engine journal" in capsys.readouterr().err

    other = tmp_path / "other.sqlite"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    assert main([command, str(other)]) == 3
    err = capsys.readouterr().err
    assert "not a wheel-engine journal" in err and "Traceback" not in err

    assert main([command, str(tmp_path)]) == 3
    assert "is a directory" in capsys.readouterr().err


def test_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert main(["status"]) == 2
    assert main(["frobnicate", "x.db"]) == 2
    assert main(["status", "x.db", "--bogus"]) == 2
    assert "unrecognized arguments" in capsys.readouterr().err
    assert main(["--help"]) == 0
    assert "status" in capsys.readouterr().out


@pytest.mark.slow
def test_running_timer_shows_running_while_engine_runs_and_after_a_crash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "t.db"
    # job:2 is committed before job:1 can fire, so "running" means both are in the journal.
    script = (
        "import asyncio, sys\n"
        "from wheel_engine import Engine\n"
        "async def main():\n"
        f"    engine = Engine({str(db)!r})\n"
        "    async def stuck(firing):\n"
        "        print('running', flush=True)\n"
        "        await asyncio.sleep(60)\n"
        "    engine.register('stuck', stuck)\n"
        "    async with engine:\n"
        "        await engine.schedule('stuck', delay=3600, key='job:2')\n"
        "        await engine.schedule('stuck', delay=0, key='job:1')\n"
        "        await asyncio.sleep(60)\n"
        "asyncio.run(main())\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "running"
        code, data = run_json(capsys, "status", str(db))  # read-only, while it runs
        assert code == 0 and isinstance(data, dict)
        assert data["states"]["RUNNING"] == 1 and data["states"]["PENDING"] == 1
        assert main(["compact", str(db)]) == 4
        capsys.readouterr()
    finally:
        proc.kill()  # SIGKILL: the attempt is committed, its outcome never will be
        proc.wait()
    code, data = run_json(capsys, "list", str(db), "--state", "RUNNING")
    assert isinstance(data, dict)
    assert [(t["key"], t["attempts"]) for t in data["timers"]] == [("job:1", 1)]


def test_show_prints_payloads_as_json(
    journal_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["show", str(journal_file), "dead:bad"]) == 0
    out = capsys.readouterr().out
    assert '{"order": "B2"}' in out  # what --payload takes back, not a Python repr
    assert "{'order'" not in out
    assert 'payload={"order": "B2"}' in out  # in the history too


def test_every_list_column_is_named(journal_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", str(journal_file)]) == 0
    header = capsys.readouterr().out.splitlines()[0]
    columns = [c.strip() for c in header.split("┃")]
    assert columns == [
        "key", "version", "handler", "state", "due (UTC)", "due in", "attempts", "last error",
    ]  # fmt: skip


def test_limit_zero_means_no_limit(journal_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, data = run_json(capsys, "list", str(journal_file), "--limit", "0")
    assert code == 0 and isinstance(data, dict) and data["shown"] == data["total"] == 6
    code, data = run_json(capsys, "list", str(journal_file), "--limit", "-1")  # 0.1.0's "all"
    assert code == 0 and isinstance(data, dict) and data["shown"] == 6
    assert main(["list", str(journal_file), "--limit", "-2"]) == 2
    err = capsys.readouterr().err
    assert "--limit" in err and len(err.strip().splitlines()) == 1


def test_errors_name_no_python_exception() -> None:
    from io import StringIO

    from wheel_engine.cli.output import Output

    err = StringIO()
    out = Output(stdout=StringIO(), stderr=err)
    out.error("timers.db: FileExistsError: [Errno 17] File exists: 'x'")
    out.error("ValueError: a journal needs a file path (run with --debug for the traceback)")
    out.error("order ValueError: kept when it is not a prefix")
    assert err.getvalue().splitlines() == [
        "wheel-engine: error: timers.db: [Errno 17] File exists: 'x'",
        "wheel-engine: error: a journal needs a file path (run with --debug for the traceback)",
        "wheel-engine: error: order ValueError: kept when it is not a prefix",
    ]


def test_library_and_json_output_do_not_import_rich(journal_file: Path) -> None:
    code = (
        "import sys, wheel_engine, wheel_engine.cli\n"
        "assert 'rich' not in sys.modules, 'import'\n"
        f"assert wheel_engine.cli.main(['list', {str(journal_file)!r}, '--json']) == 0\n"
        f"assert wheel_engine.cli.main(['show', {str(journal_file)!r}, 'nope']) == 1\n"
        "assert 'rich' not in sys.modules, 'json'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)


def test_status_says_when_the_journal_was_last_compacted(
    journal_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import time

    before = time.time()
    assert main(["compact", str(journal_file)]) == 0
    capsys.readouterr()
    code, data = run_json(capsys, "status", str(journal_file))
    assert code == 0 and isinstance(data, dict)
    assert before <= data["compacted_at"] <= time.time()
    assert data["compacted_through_seq"] > 0
    assert main(["status", str(journal_file)]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if "last compaction" in x)
    assert "ago" in line and "folded records up to #" in line and "no time" not in line
    assert "record number" not in line
