"""A limited handler's waiting timers survive a SIGKILL uncharged (SPEC guarantee 5).

A real process on SQLite is killed while one attempt runs and 49 timers wait for a token; after
recovery the 49 have no attempt charged, and only the one that started has one.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from wheel_engine import Engine, TimerState
from wheel_engine.testing import VirtualClock

CHILD = Path(__file__).with_name("limited_child.py")
COUNT = 50  # limited_child.COUNT


async def test_waiting_timers_survive_a_sigkill_uncharged(tmp_path: Path) -> None:
    db = tmp_path / "limited.db"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    proc = subprocess.Popen([sys.executable, str(CHILD), str(db)], stdout=subprocess.PIPE, env=env)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()  # blocks until the first attempt has started
        assert line.startswith("fired "), line
        started = line.split()[1]
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL

    engine = Engine(db, clock=VirtualClock())  # the handler is not registered: nothing runs
    async with engine:
        timers = {info.key: info for info in engine.timers()}
    assert len(timers) == COUNT
    assert all(info.state is TimerState.PENDING for info in timers.values())
    assert timers[started].attempts == 1
    assert sorted(info.attempts for key, info in timers.items() if key != started) == [0] * (
        COUNT - 1
    )
