"""``wheel-engine recurring DB`` and ``show DB NAME@...`` on a SQLite journal."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from wheel_engine import Engine, Firing
from wheel_engine.cli import main
from wheel_engine.testing import VirtualClock


async def _journal(path: Path) -> None:
    clock = VirtualClock()
    engine = Engine(path, clock=clock, clock_check=None)

    async def sweep(firing: Firing) -> None:
        pass

    engine.register("sweep", sweep)
    async with engine:
        await engine.schedule_recurring("s", "sweep", every=60)
        await engine.schedule_recurring("d", "sweep", cron="0 9 * * 1-5", tz="Europe/Berlin")
        await clock.advance(61)


def test_recurring_lists_rule_next_due_and_last_outcome(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "j.db"
    asyncio.run(_journal(path))
    capsys.readouterr()
    assert main(["recurring", str(path), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["recurrences"]
    assert [r["name"] for r in rows] == ["d", "s"]
    s = rows[1]
    assert s["every"] == 60 and s["next_due"] == 1_767_225_600.0 + 120
    assert s["last_outcome"] == "SUCCEEDED" and s["handler"] == "sweep"
    assert rows[0]["cron"] == "0 9 * * 1-5" and rows[0]["tz"] == "Europe/Berlin"
    assert rows[0]["last_outcome"] is None
    assert main(["recurring", str(path)]) == 0
    text = capsys.readouterr().out
    assert "every 60s" in text and "cron 0 9 * * 1-5" in text
    assert main(["show", str(path), "s@2026-01-01T00:01:00Z"]) == 0
    assert "SUCCEEDED" in capsys.readouterr().out


async def test_the_admin_commands_schedule_and_cancel_a_recurrence(tmp_path: Path) -> None:
    from wheel_engine.admin.commands import COMMAND_TABLE

    clock = VirtualClock()
    engine = Engine(tmp_path / "j.db", clock=clock, clock_check=None)

    async def sweep(firing: Firing) -> None:
        pass

    engine.register("sweep", sweep)
    async with engine:
        answer = await COMMAND_TABLE["schedule_recurring"](
            engine, {"name": "s", "handler": "sweep", "every": 30, "catch_up": "all"}
        )
        info = answer["recurrence"]
        assert info["name"] == "s" and info["every"] == 30 and info["catch_up"] == "all"
        stale = {"name": "s", "version": info["version"] + 1}
        assert await COMMAND_TABLE["cancel_recurring"](engine, stale) == {"canceled": False}
        assert [r.name for r in await engine.recurrences()] == ["s"]
        live = {"name": "s", "version": info["version"]}
        assert await COMMAND_TABLE["cancel_recurring"](engine, live) == {"canceled": True}
        assert await engine.recurrences() == []
