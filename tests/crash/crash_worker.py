"""The worker of the SIGKILL tests: a real engine on a real journal, to be SIGKILLed.

Run as ``python crash_worker.py CONFIG_JSON``. Besides the journal it writes two logs, one JSON
object a line, each line one ``write`` on an ``O_APPEND`` descriptor followed by ``fsync``
(see :class:`Log`: blank lines are padding):

- the *intent log*: what the worker *knows* is committed, and where it is. ``schedule`` lines
  are written only after ``schedule`` returned, ``batch`` lines (a whole ``schedule_many``)
  only after it returned; ``cancel-start`` before a cancel is called and ``canceled`` only
  after it returned ``CANCELED``; ``ready`` once the engine has started. ``batch-start`` /
  ``compact-start`` before a ``schedule_many`` / ``compact()`` and ``compact-done`` after it
  let the test aim its kills at those windows and tell afterwards whether a kill hit one.
- the *fire log*: one line per real handler start, written first thing in the handler.

Modes:

- ``chaos`` schedules and cancels timers (with short delays, concurrent calls) until killed.
- ``queue``: the backlog of issue 8 item 1. ``max_concurrency`` is small, each batch is
  ``batch`` timers due at the same moment with a 50 ms handler and ``max_attempts=3``, so most
  of them wait behind the workers; the worker logs ``due`` (when they come due) for the test
  to kill shortly after, and cancels some of the waiting ones. A new batch is scheduled only
  when the backlog is small, so the backlog stays bounded however many runs are killed.
  With ``poison`` the first batch has a ``poison-queue`` timer at its head.
- ``bulk`` schedules big ``schedule_many`` batches (spread dues, some overdue), cancels a few,
  and compacts after some of them (the test kills inside those windows).
- ``drain`` only runs until no timer is live; ``poison`` schedules the ``poison-final`` timer
  once (if the journal does not have it yet), then drains. The poison handler SIGKILLs its own
  process.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import random
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from wheel_engine import CancelResult, Engine, Firing, RetryPolicy

POISON_ATTEMPTS = 3
QUEUED_ATTEMPTS = 3  # the max_attempts: three crashes used to make a queued timer DEAD
QUEUED_HANDLER_SECONDS = 0.05  # the 50 ms handler: two workers drain 40 timers a second
#: So many attempts that crashes alone never make an ordinary timer DEAD in these runs.
PATIENT = RetryPolicy(max_attempts=1000, initial=0.05, multiplier=1.0, jitter=False)
POISON = RetryPolicy(max_attempts=POISON_ATTEMPTS, initial=0.05, multiplier=1.0, jitter=False)
QUEUED = RetryPolicy(max_attempts=QUEUED_ATTEMPTS, initial=0.05, multiplier=1.0, jitter=False)
#: Each handler's max_attempts, for the checks: a DEAD timer must have had that many real starts.
MAX_ATTEMPTS = {"ok": 1000, "flaky": 1000, "poison": POISON_ATTEMPTS, "slow": QUEUED_ATTEMPTS}
SHARED_KEYS = [f"shared-{i}" for i in range(4)]  # scheduled again and again: replace/keep
PAGE = os.sysconf("SC_PAGE_SIZE")  # the unit in which a killed write can be cut short
DUE_STRIDE = 7919  # a prime: batch_due() spreads a batch's dues in a scrambled order


def batch_due(base: float, span: float, count: int, index: int) -> float:
    """The due of a batch's ``index``-th timer; the checks recompute it from the ``batch`` line."""
    return base + span * ((index * DUE_STRIDE) % count) / count


def version_runs(versions: list[int]) -> list[list[int]]:
    """``[[first, last], ...]`` runs of consecutive versions: a batch's line stays short."""
    runs: list[list[int]] = []
    for version in versions:
        if runs and runs[-1][1] + 1 == version:
            runs[-1][1] = version
        else:
            runs.append([version, version])
    return runs


class Log:
    """An append-only, fsynced JSON-lines file whose lines a SIGKILL never tears.

    The kernel copies a write into the file a page at a time and gives up between pages when
    the process is being killed (the soak saw a fire line cut in two that way). So no line
    crosses a page boundary: when one would, blanks (a line the readers skip) fill the page
    first, in the same write, which can then only be cut exactly between the two.
    """

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self.end = os.lseek(self.fd, 0, os.SEEK_END)  # one writer at a time: we know the end

    def write(self, **fields: Any) -> None:
        line = (json.dumps(fields) + "\n").encode()
        assert len(line) <= PAGE, f"a log line over a page: {line[:200]!r}"
        room = PAGE - self.end % PAGE
        if len(line) > room:
            line = b" " * (room - 1) + b"\n" + line
        written = os.write(self.fd, line)
        assert written == len(line), f"short write to the log: {written} of {len(line)}"
        self.end += written
        os.fsync(self.fd)


def make_engine(cfg: dict[str, Any]) -> Engine:
    options: dict[str, Any] = {
        "durability": cfg["durability"],
        "compact_min_records": cfg.get("compact_min_records", 150),  # compactions get killed
        "clock_check": 1.0,
        "max_concurrency": cfg.get("max_concurrency", 64),
        "retention": 86400.0,  # the checks read every finished timer back from the journal
    }
    if "max_retained" in inspect.signature(Engine).parameters:
        options["max_retained"] = 10**8  # likewise (the count window of SPEC guarantee 9)
    return Engine(cfg["db"], **options)


class Worker:
    """One run: the engine, its handlers, the logs and the modes."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        self.cfg = cfg
        self.rng = random.Random(cfg["seed"])
        self.run = cfg["run"]
        self.pid = os.getpid()
        self.intents = Log(cfg["intents"])
        self.fires = Log(cfg["fires"])
        self.engine = make_engine(cfg)
        self.mine: list[tuple[str, int]] = []  # (key, version) scheduled here: cancel candidates
        self.register_handlers()

    def fired(self, firing: Firing) -> None:
        self.fires.write(
            key=firing.key,
            version=firing.version,
            attempt=firing.attempt,
            handler=firing.handler,
            due=firing.due,
            wall=time.time(),
            mono=time.monotonic_ns(),
            pid=self.pid,
            run=self.run,
        )

    def register_handlers(self) -> None:
        """Every mode registers every handler: a journal may hold timers of all of them."""
        engine, rng, fired, pid = self.engine, self.rng, self.fired, self.pid

        @engine.handler("ok", retry=PATIENT)
        async def ok(firing: Firing) -> None:
            fired(firing)
            await asyncio.sleep(rng.uniform(0.0, 0.02))  # a window in which it is RUNNING

        @engine.handler("flaky", retry=PATIENT)
        async def flaky(firing: Firing) -> None:
            fired(firing)
            if firing.attempt == 1:
                raise RuntimeError("the first attempt fails")

        @engine.handler("slow", retry=QUEUED)
        async def slow(firing: Firing) -> None:
            fired(firing)
            await asyncio.sleep(QUEUED_HANDLER_SECONDS)

        @engine.handler("poison", retry=POISON)
        def poison(firing: Firing) -> None:
            fired(firing)
            os.kill(pid, signal.SIGKILL)

    async def main(self) -> None:
        await self.engine.start()
        self.intents.write(op="ready", pid=self.pid, run=self.run)
        modes: dict[str, Callable[[], Awaitable[None]]] = {
            "chaos": self.chaos,
            "queue": self.queue,
            "bulk": self.bulk,
            "poison": self.poison,
            "drain": self.drain,
        }
        await modes[self.cfg["mode"]]()

    # ------------------------------------------------------------------ single schedules
    async def schedule(self, handler: str, key: str, **when: Any) -> None:
        conflict = self.rng.choice(["replace", "replace", "keep"])
        before = self.engine.get(key)
        info = await self.engine.schedule(
            handler, key=key, payload={"run": self.run}, on_conflict=conflict, **when
        )
        kept = before is not None and before.version == info.version  # its due may be a retry's
        self.intents.write(
            op="schedule",
            key=info.key,
            version=info.version,
            due=info.due,
            handler=info.handler,
            kept=kept,
        )
        if handler != "poison":
            self.mine.append((info.key, info.version))

    async def cancel(self, key: str, version: int) -> None:
        start = time.monotonic_ns()
        self.intents.write(op="cancel-start", key=key, version=version, mono=start)
        result = await self.engine.cancel(key, version=version)
        if result is CancelResult.CANCELED:
            self.intents.write(op="canceled", key=key, version=version, mono=start)

    async def chaos(self) -> None:
        rng = self.rng
        if self.engine.get("poison-chaos") is None:
            await self.schedule("poison", "poison-chaos", delay=0.3)
        count = 0
        while count < self.cfg["timers"]:
            calls = []
            for _ in range(rng.randint(1, 6)):
                count += 1
                key = rng.choice(SHARED_KEYS) if rng.random() < 0.2 else f"r{self.run}-{count}"
                handler = "flaky" if rng.random() < 0.2 else "ok"
                roll = rng.random()
                if roll < 0.1:
                    when: dict[str, Any] = {"delay": 0}
                elif roll < 0.2:
                    when = {"at": time.time() - rng.uniform(0, 5)}  # overdue
                else:
                    when = {"delay": rng.uniform(0.01, 1.0)}
                calls.append(self.schedule(handler, key, **when))
            await asyncio.gather(*calls)  # concurrent: they share group commits
            if self.mine and rng.random() < 0.5:
                key, version = self.mine.pop(rng.randrange(len(self.mine)))
                if rng.random() < 0.2:
                    version -= 1  # usually stale: must not touch the live version
                await self.cancel(key, version)
            await asyncio.sleep(rng.uniform(0.0, 0.03))
        await asyncio.Event().wait()  # until killed

    # ------------------------------------------------------------------ batches
    async def schedule_batch(
        self, number: int, handler: str, count: int, base: float, span: float
    ) -> list[str]:
        """One ``schedule_many`` of ``count`` fresh keys, bracketed by its two log lines."""
        prefix = f"b{self.run}-{number}-"
        keys = [f"{prefix}{i}" for i in range(count)]
        dues = [batch_due(base, span, count, i) for i in range(count)]
        requests = [
            {"handler": handler, "key": key, "at": due, "payload": {"run": self.run}}
            for key, due in zip(keys, dues, strict=True)
        ]
        self.intents.write(op="batch-start", run=self.run, number=number, count=count)
        infos = await self.engine.schedule_many(requests)
        # The batch line names versions and dues by formula: check the formula holds.
        assert [(i.key, i.due) for i in infos] == list(zip(keys, dues, strict=True)), infos[:3]
        self.intents.write(
            op="batch",
            run=self.run,
            number=number,
            prefix=prefix,
            count=count,
            handler=handler,
            base=base,
            span=span,
            versions=version_runs([info.version for info in infos]),
        )
        return keys

    async def cancel_some(self, keys: list[str], count: int) -> None:
        """Cancel up to ``count`` of ``keys`` that are still pending (stale ones too)."""
        for key in self.rng.sample(keys, min(count, len(keys))):
            info = self.engine.get(key)
            if info is not None and info.state.is_live:
                await self.cancel(key, info.version)

    def backlog(self) -> list[str]:
        """The live ``slow`` timers: waiting (PENDING, or RUNNING but queued) or running."""
        return [info.key for info in self.engine.timers(handler="slow") if info.state.is_live]

    async def queue(self) -> None:
        """Timers waiting behind ``max_concurrency``; the test kills shortly after ``due``."""
        rng, batch = self.rng, self.cfg["batch"]
        due = time.time()  # a backlog recovered from earlier runs is due at once
        live = self.engine.stats()
        if live["pending"] + live["running"] < batch // 3:
            due += self.cfg["lead"]
            if self.cfg.get("poison") and self.engine.get("poison-queue") is None:
                await self.schedule("poison", "poison-queue", at=due)  # first in the queue
            await self.schedule_batch(0, "slow", batch, base=due, span=0.0)  # all due at once
        self.intents.write(op="due", run=self.run, at=due)
        await asyncio.sleep(max(0.0, due - time.time()) + rng.uniform(0.02, 0.1))
        while True:  # cancel some of the waiting ones (recovered ones included)
            await self.cancel_some(self.backlog(), 1)
            await asyncio.sleep(rng.uniform(0.03, 0.12))

    async def bulk(self) -> None:
        """Big ``schedule_many`` batches, with explicit compactions after some of them."""
        rng, engine = self.rng, self.engine
        number = scheduled = 0
        while scheduled < self.cfg["timers"]:
            count = rng.randint(self.cfg["batch"] // 4, self.cfg["batch"])
            handler = "flaky" if rng.random() < 0.2 else "ok"
            base = time.time() - rng.uniform(0.0, 0.5)  # the first ones are overdue
            keys = await self.schedule_batch(number, handler, count, base, rng.uniform(0.2, 2.0))
            number += 1
            scheduled += count
            await self.cancel_some(keys, rng.randint(0, 3))
            if rng.random() < 0.5:
                self.intents.write(op="compact-start", run=self.run, number=number)
                await engine.compact()
                self.intents.write(op="compact-done", run=self.run, number=number)
            await asyncio.sleep(rng.uniform(0.0, 0.05))
        self.intents.write(op="idle", run=self.run)  # no more windows to aim at
        await asyncio.Event().wait()  # until killed

    # ------------------------------------------------------------------ the end
    async def poison(self) -> None:
        if self.engine.get("poison-final") is None:
            await self.schedule("poison", "poison-final", delay=0.05)
        await self.drain()

    async def drain(self) -> None:
        engine = self.engine
        while True:
            stats = engine.stats()
            if stats["pending"] == 0 and stats["running"] == 0 and stats["unhandled"] == 0:
                break
            await asyncio.sleep(0.02)
        await engine.close()
        self.intents.write(op="done", pid=self.pid, run=self.run)


if __name__ == "__main__":
    asyncio.run(Worker(json.loads(sys.argv[1])).main())
