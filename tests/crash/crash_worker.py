"""The worker of ``test_crash_sigkill.py``: a real engine on a real journal, to be SIGKILLed.

Run as ``python crash_worker.py CONFIG_JSON``. Besides the journal it writes two logs, one JSON
object a line, each line one ``write`` on an ``O_APPEND`` descriptor followed by ``fsync``:

- the *intent log*: what the worker *knows* is committed. ``schedule`` lines are written only
  after ``schedule`` returned; ``cancel-start`` before a cancel is called and ``canceled`` only
  after it returned ``CANCELED``; ``ready`` once the engine has started.
- the *fire log*: one line per handler call, written first thing in the handler.

Modes: ``chaos`` schedules and cancels timers (with short delays) until killed; ``drain`` only
runs until no timer is live; ``poison`` schedules the ``poison-final`` timer once (if the
journal does not have it yet), then drains. The poison handler SIGKILLs its own process.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import sys
import time
from typing import Any

from wheel_engine import CancelResult, Engine, Firing, RetryPolicy

POISON_ATTEMPTS = 3
#: So many attempts that crashes alone never make an ordinary timer DEAD in these runs.
PATIENT = RetryPolicy(max_attempts=1000, initial=0.05, multiplier=1.0, jitter=False)
POISON = RetryPolicy(max_attempts=POISON_ATTEMPTS, initial=0.05, multiplier=1.0, jitter=False)
SHARED_KEYS = [f"shared-{i}" for i in range(4)]  # scheduled again and again: replace/keep


class Log:
    """An append-only, fsynced JSON-lines file."""

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def write(self, **fields: Any) -> None:
        os.write(self.fd, (json.dumps(fields) + "\n").encode())
        os.fsync(self.fd)


async def main(cfg: dict[str, Any]) -> None:
    rng = random.Random(cfg["seed"])
    run = cfg["run"]
    pid = os.getpid()
    intents = Log(cfg["intents"])
    fires = Log(cfg["fires"])
    engine = Engine(
        cfg["db"],
        durability=cfg["durability"],
        compact_min_records=cfg.get("compact_min_records", 150),  # compactions get killed too
        clock_check=1.0,
    )

    def fired(firing: Firing) -> None:
        fires.write(
            key=firing.key,
            version=firing.version,
            attempt=firing.attempt,
            handler=firing.handler,
            due=firing.due,
            wall=time.time(),
            mono=time.monotonic_ns(),
            pid=pid,
            run=run,
        )

    @engine.handler("ok", retry=PATIENT)
    async def ok(firing: Firing) -> None:
        fired(firing)
        await asyncio.sleep(rng.uniform(0.0, 0.02))  # a window in which it is RUNNING

    @engine.handler("flaky", retry=PATIENT)
    async def flaky(firing: Firing) -> None:
        fired(firing)
        if firing.attempt == 1:
            raise RuntimeError("the first attempt fails")

    @engine.handler("poison", retry=POISON)
    def poison(firing: Firing) -> None:
        fired(firing)
        os.kill(pid, signal.SIGKILL)

    await engine.start()
    intents.write(op="ready", pid=pid, run=run)

    mine: list[tuple[str, int]] = []  # (key, version) scheduled by this run: cancel candidates

    async def schedule(handler: str, key: str, **when: Any) -> None:
        conflict = rng.choice(["replace", "replace", "keep"])
        before = engine.get(key)
        info = await engine.schedule(
            handler, key=key, payload={"run": run}, on_conflict=conflict, **when
        )
        kept = before is not None and before.version == info.version  # its due may be a retry's
        intents.write(
            op="schedule",
            key=info.key,
            version=info.version,
            due=info.due,
            handler=info.handler,
            kept=kept,
        )
        if handler != "poison":
            mine.append((info.key, info.version))

    if cfg["mode"] == "chaos":
        if engine.get("poison-chaos") is None:
            await schedule("poison", "poison-chaos", delay=0.3)
        count = 0
        while count < cfg["timers"]:
            calls = []
            for _ in range(rng.randint(1, 6)):
                count += 1
                key = rng.choice(SHARED_KEYS) if rng.random() < 0.2 else f"r{run}-{count}"
                handler = "flaky" if rng.random() < 0.2 else "ok"
                roll = rng.random()
                if roll < 0.1:
                    when: dict[str, Any] = {"delay": 0}
                elif roll < 0.2:
                    when = {"at": time.time() - rng.uniform(0, 5)}  # overdue
                else:
                    when = {"delay": rng.uniform(0.01, 1.0)}
                calls.append(schedule(handler, key, **when))
            await asyncio.gather(*calls)  # concurrent: they share group commits
            if mine and rng.random() < 0.5:
                key, version = mine.pop(rng.randrange(len(mine)))
                if rng.random() < 0.2:
                    version -= 1  # usually stale: must not touch the live version
                start = time.monotonic_ns()
                intents.write(op="cancel-start", key=key, version=version, mono=start)
                result = await engine.cancel(key, version=version)
                if result is CancelResult.CANCELED:
                    intents.write(op="canceled", key=key, version=version, mono=start)
            await asyncio.sleep(rng.uniform(0.0, 0.03))
        await asyncio.Event().wait()  # until killed
    if cfg["mode"] == "poison" and engine.get("poison-final") is None:
        await schedule("poison", "poison-final", delay=0.05)
    while True:
        stats = engine.stats()
        if stats["pending"] == 0 and stats["running"] == 0 and stats["unhandled"] == 0:
            break
        await asyncio.sleep(0.02)
    await engine.close()
    intents.write(op="done", pid=pid, run=run)


if __name__ == "__main__":
    asyncio.run(main(json.loads(sys.argv[1])))
