"""One node process for test_nodes_processes.py: a real ``Engine`` on a PostgreSQL URL, driven
by JSON commands on stdin, logging every firing to a file.

Usage: ``node_process.py URL NODE LEASE LOG``. Prints ``{"ready": NODE}`` once the engine runs,
then reads one command per line and answers one line each, in order:

- ``{"op": "schedule_many", "requests": [...]}`` -> ``{"scheduled": [[key, version], ...]}``
  (answered once committed: these timers must fire);
- ``{"op": "cancel", "key": K, "version": V | null}`` -> ``{"cancel": "CANCELED" | ...}``.

Handlers (payload ``{"hold": seconds}``, optional):

- ``"h"`` logs the firing, then holds (``asyncio.sleep``) and returns;
- ``"slow"`` logs the firing, holds (default 60 s), and logs ``"cancelled"`` if its task is
  cancelled (a cancel from another node reached it);
- ``"flaky"`` logs the firing, holds, then fails its first attempt (retried 0.2 s later);
- ``"capped"`` (registered when ``WHEEL_TEST_LIMITS`` holds a JSON object of flow-control
  options, ``{"concurrency": 2, "limit_scope": "cluster"}`` say) logs the firing and holds
  (default 60 s), under those limits;
- ``"block"``, a plain handler, logs the firing and, on its first attempt, blocks the whole
  process's loop for the hold (``time.sleep``): what a handler that must not block does.

``{"op": "stats"}`` -> ``{"stats": engine.stats()["node_faults"]}``. A command the journal
refuses (the database unreachable) answers ``{"error": "StoreUnavailable: ..."}``.

Each log line is JSON, written and flushed when the handler starts: key, version, attempt,
node, wall time, due, and the epoch the attempt was claimed under. SIGTERM or the end of stdin
closes the engine (grace 2 s) and exits 0.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from typing import IO, Any

from journal.errors import JournalError
from wheel_engine import Engine, Firing, RetryPolicy

#: Seconds ``close()`` waits for running handlers when the test stops the node.
GRACE = 2.0


def claim_epoch(engine: Engine, key: str, version: int) -> int | None:
    """The epoch this node claimed ``(key, version)`` under: a test-only peek at the node's
    in-flight claims (``NodeSink.epochs``), the value its fenced outcome will carry."""
    node = getattr(engine, "_node", None)
    claims = getattr(getattr(node, "_sink", None), "epochs", {})
    claim = claims.get(key)
    return claim[1] if claim is not None and claim[0] == version else None


def register(engine: Engine, node: str, log: IO[str]) -> None:
    def record(firing: Firing, **extra: Any) -> None:
        line = {"key": firing.key, "version": firing.version, "attempt": firing.attempt}
        line |= {"node": node, "at": time.time(), "due": firing.due}
        line |= {"epoch": claim_epoch(engine, firing.key, firing.version), **extra}
        log.write(json.dumps(line) + "\n")
        log.flush()

    def hold(firing: Firing, default: float) -> float:
        payload = firing.payload
        return float(payload.get("hold", default)) if isinstance(payload, dict) else default

    async def h(firing: Firing) -> None:
        record(firing)
        await asyncio.sleep(hold(firing, 0.0))

    async def slow(firing: Firing) -> None:
        record(firing)
        try:
            await asyncio.sleep(hold(firing, 60.0))
        except asyncio.CancelledError:
            record(firing, cancelled=True)
            raise

    async def flaky(firing: Firing) -> None:
        record(firing)
        await asyncio.sleep(hold(firing, 0.0))
        if firing.attempt == 1:
            raise RuntimeError("the first attempt fails")

    def block(firing: Firing) -> None:
        record(firing)
        if firing.attempt == 1:
            time.sleep(hold(firing, 0.0))

    engine.register("h", h)
    limits = os.environ.get("WHEEL_TEST_LIMITS")
    if limits:
        engine.register("capped", slow, **json.loads(limits))
    engine.register("block", block)
    engine.register("slow", slow)
    engine.register("flaky", flaky, retry=RetryPolicy(initial=0.2, jitter=False))


async def answer(engine: Engine, command: dict[str, Any]) -> dict[str, Any]:
    if command["op"] == "schedule_many":
        infos = await engine.schedule_many(command["requests"])
        return {"scheduled": [[info.key, info.version] for info in infos]}
    if command["op"] == "cancel":
        result = await engine.cancel(command["key"], version=command.get("version"))
        return {"cancel": result.name}
    if command["op"] == "stats":
        return {"stats": engine.stats().get("node_faults", {})}
    raise ValueError(f"unknown command {command!r}")


async def serve(engine: Engine, stop: asyncio.Event) -> None:
    """Answer commands from stdin until it ends or ``stop`` is set."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    stopping = loop.create_task(stop.wait())
    while True:
        reading = loop.create_task(reader.readline())
        await asyncio.wait({reading, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if stop.is_set() or not reading.done() or not (text := reading.result()):
            reading.cancel()
            stopping.cancel()
            return
        try:
            reply = await answer(engine, json.loads(text))
        except JournalError as exc:  # the database unreachable: the caller sees it, goes on
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


async def main(url: str, node: str, lease: float, log_path: str) -> None:
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    with open(log_path, "a", encoding="utf-8") as log:
        engine = Engine(url, node=node, lease=lease, horizon=60.0)
        register(engine, node, log)
        await engine.start()
        try:
            sys.stdout.write(json.dumps({"ready": node}) + "\n")
            sys.stdout.flush()
            await serve(engine, stop)
        finally:
            await engine.close(grace=GRACE)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]))
