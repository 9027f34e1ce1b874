"""examples/retry_later.py: backoff with jitter, dead letters, permanent errors, redrive."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from wheel_engine.testing import VirtualClock

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "retry_later.py"


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("example_retry_later", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def test_retry_dead_letter_and_redrive(capsys: pytest.CaptureFixture[str]) -> None:
    states = await load().main(clock=VirtualClock())
    assert states == {"inv:A": "SUCCEEDED", "inv:B": "DEAD", "inv:C": "SUCCEEDED"}
    out = capsys.readouterr().out
    assert "inv:A attempt 3" in out and "inv:A attempt 4" not in out
    assert "inv:B attempt 2" not in out  # PermanentError: dead at once
    assert "inv:C: DEAD after 4 attempt(s)" in out
    assert "delivered ['A', 'C']" in out


@pytest.mark.slow
def test_retry_later_runs_as_a_program() -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "final:" in done.stdout
