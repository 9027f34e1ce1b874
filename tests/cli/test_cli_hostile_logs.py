"""What the library logs, and what of it reaches a person (SPEC guarantee 11's neighbours).

- The CLI's one-line rule holds whatever the library logs on the way to an error: a commit that
  fails for real (the file size limit, as a full disk would) logs a WARNING, and the command
  still prints exactly one line.
- At DEBUG the engine logs a failed attempt with the same described, bounded text it keeps as
  ``last_error``: never a raw traceback, never past ``describe_error`` or the 2 KB bound.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from journal import Journal, Schedule
from wheel_engine import Engine, Firing, RetryPolicy
from wheel_engine.diagnostics import DEFAULT_MAX_ERROR_BYTES
from wheel_engine.testing import VirtualClock

ROOT = Path(__file__).resolve().parents[2]


async def _journal(path: Path) -> None:
    journal = await Journal.open(path)
    try:
        await journal.submit([Schedule("k", 1, "h", time.time() + 3600, None, time.time())])
    finally:
        await journal.close()


def _small_files() -> None:  # in the child: writes past 40 kB fail with EFBIG, as on a full disk
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (40_000, 40_000))


@pytest.mark.slow
def test_failed_commit_is_one_line_on_stderr(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    asyncio.run(_journal(db))
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    payload = json.dumps("x" * 60_000)  # its commit needs more than the 40 kB allowed
    argv = ["schedule", str(db), "h", "--delay", "60", "--payload", payload]
    done = subprocess.run(
        [sys.executable, "-m", "wheel_engine.cli", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        preexec_fn=_small_files,
    )
    assert done.returncode == 3
    assert done.stderr.count("\n") == 1, done.stderr  # the library's WARNING is not a 2nd line
    assert done.stderr.startswith("wheel-engine: error: ") and "committing" in done.stderr


class Leaky(Exception):
    """An exception whose words carry what must not be logged (a secret) and a lot of it."""


async def _fail_once(describe: bool) -> str | None:
    clock = VirtualClock()
    engine = Engine(None, clock=clock)

    def describe_error(exc: BaseException) -> str:
        return "downstream refused the order"

    @engine.handler(
        "h",
        retry=RetryPolicy(max_attempts=3, initial=1.0, jitter=False),
        describe_error=describe_error if describe else None,
    )
    async def h(firing: Firing) -> None:
        raise Leaky("token=SECRET-1234 " + "y" * 20_000)

    async with engine:
        await engine.schedule("h", delay=1, key="k")
        await clock.advance(1.5)
        info = engine.get("k")
        assert info is not None and info.attempts == 1
        return info.last_error


@pytest.mark.parametrize("describe", [False, True])
async def test_debug_log_of_a_failed_attempt_is_the_bounded_description(
    caplog: pytest.LogCaptureFixture, describe: bool
) -> None:
    with caplog.at_level(logging.DEBUG, logger="wheel_engine"):
        last_error = await _fail_once(describe)
    assert last_error is not None
    failed = [r for r in caplog.records if "failed: timer k" in r.getMessage()]
    assert failed, [r.getMessage() for r in caplog.records]
    for record in caplog.records:
        assert record.exc_info is None  # no traceback: it would bypass the describer
        assert len(record.getMessage()) < DEFAULT_MAX_ERROR_BYTES + 200
    if describe:
        assert "SECRET" not in caplog.text
    assert last_error in failed[0].getMessage()
