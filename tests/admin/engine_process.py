"""Start ``serve_engine.py`` in another process and wait until it serves (tests only)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SCRIPT = Path(__file__).with_name("serve_engine.py")
ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 20.0  # seconds for the child to import, recover and bind (a loaded CI machine)


@contextmanager
def engine_process(
    journal: Path,
    *,
    record: tuple[str, ...] = ("h",),
    fail: tuple[str, ...] = (),
    admin: bool = True,
    limits: dict[str, dict[str, object]] | None = None,
) -> Iterator[subprocess.Popen[str]]:
    """A live engine on ``journal`` in a child process; SIGTERM (then SIGKILL) at the end.
    ``limits``: a recording handler's limit keywords for ``register``, by name."""
    config = {
        "journal": str(journal),
        "record": record,
        "fail": fail,
        "admin": admin,
        "limits": limits or {},
    }
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), json.dumps(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # bounded by the child: it prints READY or exits
        if not line.startswith("READY"):
            proc.kill()
            _, err = proc.communicate(timeout=START_TIMEOUT)
            raise AssertionError(f"engine process did not start: {line!r} {err}")
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=START_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def wait_for_line(path: Path, line: str, timeout: float = 10.0) -> bool:
    """Poll ``path`` until it holds ``line`` (a firing in the child), at most ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and line in path.read_text().splitlines():
            return True
        time.sleep(0.02)
    return False
