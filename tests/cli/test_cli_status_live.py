"""``status`` beside a running engine: its limits and live figures come from the engine itself
(through the admin socket), since the journal holds no limits; with no engine answering, the
journal's figures alone and a note saying why the live ones are missing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from live_engine import fresh_journal, procs

from wheel_engine.cli import main


def test_no_engine_answering_says_the_live_figures_need_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(fresh_journal(tmp_path / "t.db"))
    assert main(["status", db]) == 0
    captured = capsys.readouterr()
    assert "no engine answers on the admin socket" in captured.err
    assert "limited handler" not in captured.out
    assert main(["status", db, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["engine"] is None and data["engine_problem"] is None


@pytest.mark.slow
def test_a_running_engine_shows_its_limits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    journal = fresh_journal(tmp_path / "t.db")
    db = str(journal)
    limits = {"orders.expire": {"concurrency": 4, "rate": 50.0}}
    with procs.engine_process(journal, record=("orders.expire", "mail.send"), limits=limits):
        assert main(["status", db, "--json"]) == 0
        data = json.loads(capsys.readouterr().out)
        engine = data["engine"]
        assert engine is not None and data["engine_problem"] is None
        shown = engine["stats"]["limits"]
        assert list(shown) == ["orders.expire"]  # mail.send has no limit
        assert shown["orders.expire"]["concurrency"] == 4
        assert shown["orders.expire"]["rate"] == 50.0
        assert shown["orders.expire"]["running"] == 0

        assert main(["status", db]) == 0
        out = capsys.readouterr().out
        assert f"pid {engine['pid']}" in out
        row = next(line for line in out.splitlines() if line.strip().startswith("orders.expire"))
        assert "4" in row.split() and "50.0" in row.split()
        assert not any(line.strip().startswith("mail.send") for line in out.splitlines())
