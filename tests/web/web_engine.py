"""A real engine in its own process that writes the journal the console tests read.

``python web_engine.py JOURNAL`` opens ``Engine(JOURNAL, admin=True)``, schedules (on a fresh
journal) the timers below, prints ``READY <pid>`` and serves until SIGTERM:

- ``order-<n>`` (``orders.expire``): due over the next day, each with a payload holding
  :data:`SECRET` (the tests check it stays hidden);
- :data:`HOSTILE_KEY`: a key holding ``<script>``, due in ten minutes;
- ``mail-<n>`` (``mail.send``): due now; the handler raises ``PermanentError`` with
  :data:`HOSTILE_ERROR`, so they go DEAD at once, until ``JOURNAL.heal`` exists: from then on
  it succeeds. Every successful firing appends ``key#version`` to ``JOURNAL.fired``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SECRET = "card-4111-SECRET"
HOSTILE_KEY = 'order-<script>alert("k")</script>'
HOSTILE_ERROR = 'smtp said <script>alert("e")</script>'
ORDERS = 30
MAILS = 3
ROOT = Path(__file__).resolve().parents[2]


async def serve(journal: str) -> None:
    from wheel_engine import Engine, Firing, PermanentError

    fired = Path(journal + ".fired")
    heal = Path(journal + ".heal")
    engine = Engine(journal, admin=True)

    async def record(firing: Firing) -> None:
        with fired.open("a") as f:
            f.write(f"{firing.key}#{firing.version}\n")

    async def mail(firing: Firing) -> None:
        if not heal.exists():
            raise PermanentError(HOSTILE_ERROR)
        await record(firing)

    engine.register("orders.expire", record)
    engine.register("mail.send", mail)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with engine:
        if engine.get("order-1") is None:
            for n in range(1, ORDERS + 1):
                await engine.schedule(
                    "orders.expire",
                    key=f"order-{n}",
                    delay=600.0 + n * 2400.0,
                    payload={"order": n, "card": SECRET},
                )
            await engine.schedule("orders.expire", key=HOSTILE_KEY, delay=600.0)
            for n in range(1, MAILS + 1):
                await engine.schedule("mail.send", key=f"mail-{n}", delay=0.0)
        print(f"READY {os.getpid()}", flush=True)
        await stop.wait()


@contextmanager
def engine_process(journal: Path) -> Iterator[subprocess.Popen[str]]:
    """The engine above on ``journal``, in a child process; SIGTERM (then SIGKILL) at the end."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.Popen(
        [sys.executable, __file__, str(journal)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("READY"):
            proc.kill()
            _, err = proc.communicate(timeout=20)
            raise AssertionError(f"engine process did not start: {line!r} {err}")
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def poll(check: object, timeout: float = 10.0) -> bool:
    """Call ``check`` until it is true, at most ``timeout`` seconds (the child works meanwhile)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


if __name__ == "__main__":
    asyncio.run(serve(sys.argv[1]))
