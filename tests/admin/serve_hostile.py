"""A live engine for the hostile-clients test: ``python serve_hostile.py JOURNAL``.

``Engine(JOURNAL, admin=True)`` on the real clock, with a handler ``h`` that does nothing and
four pending timers ``k0``..``k3`` (due in an hour) for requests to name. Meanwhile it schedules
a background timer ``bg-N`` every :data:`TICK` seconds, due :data:`DELAY` seconds later, whose
handler records how late it ran (keys reused modulo 64, each long fired by then: the journal's
live state stays small). Prints ``READY <pid>`` once serving; on SIGTERM it closes and writes
the lateness of every background firing (seconds, JSON) to ``JOURNAL.lateness``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
import time
from pathlib import Path

from wheel_engine import Engine, Firing

TICK, DELAY = 0.005, 0.05


async def serve(journal: str) -> None:
    lateness: list[float] = []
    engine = Engine(journal, durability="normal", admin=True)

    @engine.handler("h")
    async def h(firing: Firing) -> None:
        pass

    @engine.handler("bg")
    async def bg(firing: Firing) -> None:
        lateness.append(time.time() - firing.due)

    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with engine:
        for n in range(4):
            await engine.schedule("h", delay=3600, key=f"k{n}", payload={"n": n})
        print(f"READY {os.getpid()}", flush=True)
        n = 0
        while not stop.is_set():
            n += 1
            await engine.schedule("bg", delay=DELAY, key=f"bg-{n % 64}")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), TICK)
    Path(journal + ".lateness").write_text(json.dumps(lateness))


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)  # to stderr: the test shows it if it fails
    asyncio.run(serve(sys.argv[1]))
