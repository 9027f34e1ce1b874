"""One story of the writing commands, the one in ``docs/contract.md``, told the same by the
top-level ``--help``, each command's ``--help``, their messages through a running engine's admin
socket and written directly, and the guides: through the socket when the engine serves one,
directly when no engine runs, exit 4 otherwise."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

from wheel_engine.cli import build_parser, main
from wheel_engine.cli.remote import KEPT

ROOT = Path(__file__).resolve().parents[2]
WRITING = ("schedule", "cancel", "redrive", "compact")


def _engine_process() -> ModuleType:
    path = ROOT / "tests" / "admin" / "engine_process.py"
    spec = importlib.util.spec_from_file_location("engine_process", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def help_of(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit):
        build_parser().parse_args([*argv, "--help"])
    return " ".join(capsys.readouterr().out.split())


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_every_help_tells_the_contract_s_story(capsys: pytest.CaptureFixture[str]) -> None:
    top = help_of(capsys)
    assert "take the lock" not in top and "takes the lock" not in top
    assert "admin socket" in top and "refuse (exit 4)" in top
    for command in WRITING:
        text = help_of(capsys, command)
        assert "admin socket" in text, command
        assert "exits 4 while an engine without the socket runs" in text, command
        assert "refuses (exit 4) while an engine runs" not in text, command


def test_the_guides_do_not_say_redrive_needs_a_stopped_service() -> None:
    for page in ("docs/guide/retries.md", "examples/retry_later.py"):
        text = " ".join((ROOT / page).read_text().split())
        assert "while the service is stopped" not in text, page
        assert "admin socket" in text, page


@pytest.mark.slow
def test_keep_and_redrive_say_the_same_through_the_engine_and_directly(
    journal_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(journal_file)
    keep = ["schedule", db, "ok", "--delay", "3600", "--key", "kept:1", "--on-conflict", "keep"]
    code, out, _ = run(capsys, *keep)
    assert code == 0 and out.startswith("scheduled kept:1:")  # nothing live: a schedule
    code, out, err = run(capsys, *keep[:4], "7200", *keep[5:])
    assert code == 0 and out.startswith("kept kept:1:") and KEPT in err
    code, out, err = run(capsys, "redrive", db, "dead:bad", "--at", "2099-01-01T00:00Z")
    assert code == 0 and "they fire when an engine with their handler next starts" in err
    procs = _engine_process()
    with procs.engine_process(journal_file, record=("ok", "mail"), fail=("bad", "flaky")):
        code, out, err = run(capsys, *keep[:4], "60", *keep[5:], "--json")
        assert code == 0 and json.loads(out)["via"] == "engine" and json.loads(out)["kept"]
        code, out, err = run(capsys, *keep[:4], "60", *keep[5:])
        assert code == 0 and out.startswith("kept kept:1:") and KEPT in err
        fresh = [*keep[:6], "kept:2", *keep[7:]]
        code, out, err = run(capsys, *fresh)
        assert code == 0 and out.startswith("scheduled kept:2:") and KEPT not in err
        code, out, err = run(capsys, "redrive", db, "--all-dead")
        assert code == 0 and "the running engine fires them when due" in err
        assert "next starts" not in err
