"""The machine's own timer noise, for the hostile-clients test: ``python loop_anchor.py OUT``.

A bare asyncio loop (no engine) that arms a ``call_at`` every :data:`TICK` seconds, due
:data:`DELAY` seconds later, as ``serve_hostile.py`` schedules its background timers, and records
how late each callback ran. It runs beside the engine for the same span, so what the machine's
load does to any timer (a loaded CI runner, other processes) shows here too, and the engine is
judged by what it adds on top. Prints ``READY``; on SIGTERM writes the lateness (seconds, JSON)
to ``OUT``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
from pathlib import Path

TICK, DELAY = 0.005, 0.05


async def run(out: str) -> None:
    loop = asyncio.get_running_loop()
    lateness: list[float] = []
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)

    def fired(due: float) -> None:
        lateness.append(loop.time() - due)

    print("READY", flush=True)
    while not stop.is_set():
        due = loop.time() + DELAY
        loop.call_at(due, fired, due)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), TICK)
    Path(out).write_text(json.dumps(lateness))


if __name__ == "__main__":
    asyncio.run(run(sys.argv[1]))
