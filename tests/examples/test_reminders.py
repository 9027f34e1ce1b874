"""examples/reminders.py: absolute times, moving a reminder, keep and error on conflict."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from wheel_engine.testing import VirtualClock

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "reminders.py"


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("example_reminders", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def test_reminders_fire_in_time_order_and_the_moved_one_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    sent = await load().main(clock=VirtualClock())
    assert sent == [
        "ann: stand-up in 5 minutes",
        "ann: lunch with Carl",
        "bob: dentist moved to 4",
    ]
    out = capsys.readouterr().out
    assert "dentist at 3" not in out  # the old time of the moved reminder never fired
    assert "not rescheduled" in out  # on_conflict="error"


async def test_reminders_on_a_durable_journal(tmp_path: Path) -> None:
    sent = await load().main(journal=str(tmp_path / "reminders.db"), clock=VirtualClock())
    assert len(sent) == 3


@pytest.mark.slow
def test_reminders_run_as_a_program() -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("reminder reminder:") == 3
