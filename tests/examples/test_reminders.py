"""examples/reminders.py: absolute times, moving a reminder, keep and error on conflict."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
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


#: When to kill the first run, in seconds after it printed its "moved" line: before anything
#: fired, after the stand-up reminder (0.4 s), after lunch (0.8 s), after the dentist (1.0 s).
KILL_MOMENTS = (0.05, 0.45, 0.85, 1.05)


def killed_then_run_again(journal: Path, moment: float) -> subprocess.CompletedProcess[str]:
    """The docstring's crash run: run on ``journal``, ``kill -9`` at ``moment``, run again."""
    first = subprocess.Popen(
        [sys.executable, str(EXAMPLE), str(journal)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert first.stdout is not None
        while not (line := first.stdout.readline()).startswith("moved"):
            assert line, "the first run ended before it moved the dentist reminder"
        time.sleep(moment)  # real time is the point: the kill lands where it lands
    finally:
        first.kill()
        first.communicate()
    return subprocess.run(
        [sys.executable, str(EXAMPLE), str(journal)], capture_output=True, text=True, timeout=60
    )


@pytest.mark.slow
def test_reminders_killed_at_any_moment_then_run_again_exit_0(tmp_path: Path) -> None:
    """Once exit 1 without a word when the kill landed after the first reminders fired: the
    second run saw 5 firings for the 3 it expected (the recovered ones)."""
    with ThreadPoolExecutor(len(KILL_MOMENTS)) as pool:
        runs = list(
            pool.map(
                killed_then_run_again,
                [tmp_path / f"reminders-{n}.db" for n in range(len(KILL_MOMENTS))],
                KILL_MOMENTS,
            )
        )
    for moment, done in zip(KILL_MOMENTS, runs, strict=True):
        assert done.returncode == 0, (moment, done.stdout, done.stderr)
        firings = done.stdout.count("reminder reminder:")
        assert firings >= 3, (moment, done.stdout)
        if firings > 3:  # what the killed run left: said, and counted right
            assert f"also fired {firings - 3} reminder(s) an earlier run left" in done.stdout
        else:
            assert "also fired" not in done.stdout
