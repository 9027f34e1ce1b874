"""An engine in its own process, for the admin and CLI tests: ``python serve_engine.py CONFIG``.

CONFIG is JSON: ``{"journal": PATH, "record": [names], "fail": [names], "admin": bool,
"limits": {name: {register's limit keywords}}}``.
Handlers named in ``record`` append ``key#version`` to ``<journal>.fired`` (one line each, then
fsync-free flush: the test polls the file), under the limits ``limits`` gives a name, if any;
those in ``fail`` raise ``PermanentError`` (their
timers go DEAD). With ``admin`` it is ``Engine(journal, admin=True)``: it serves the admin
socket while it runs. Prints ``READY <pid>`` once serving; SIGTERM closes it cleanly.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from wheel_engine import Engine, Firing, PermanentError


async def serve(config: dict[str, object]) -> None:
    journal = str(config["journal"])
    fired = Path(journal + ".fired")
    engine = Engine(journal, admin=bool(config.get("admin")))

    async def record(firing: Firing) -> None:
        with fired.open("a") as f:
            f.write(f"{firing.key}#{firing.version}\n")

    async def fail(firing: Firing) -> None:
        raise PermanentError("refused by the test's downstream")

    limits: dict[str, dict[str, Any]] = config.get("limits", {})  # type: ignore[assignment]
    for name in config.get("record", []):  # type: ignore[attr-defined]
        engine.register(name, record, **limits.get(name, {}))
    for name in config.get("fail", []):  # type: ignore[attr-defined]
        engine.register(name, fail)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    async with engine:
        print(f"READY {os.getpid()}", flush=True)
        await stop.wait()


if __name__ == "__main__":
    asyncio.run(serve(json.loads(sys.argv[1])))
