"""Figure 7's two populations of pending timers, side by side in one process, and the rounds
measured on top of them (:mod:`bench.compare.scaling` describes the figure).

:class:`Scene` holds an asyncio loop whose heap holds N ``TimerHandle``\\ s and, on a second
loop, ``Engine(None, tick=0.001)`` holding N timers, both with the same dues (uniform between
one and two hours ahead, from a fixed seed); :meth:`Scene.grow` adds to both. A round runs on
one loop while the other stands still; each first waits until its loop is idle
(:func:`settle`), so the engine catches up the ticks it missed while the other loop ran outside
the measure.

Idle staging. The wheel moves the entries of a big slot ahead of time, a budget per loop
callback, while the loop is otherwise idle (``wheel_engine.trigger``): after a growth of
millions of far timers that can be seconds of CPU, which would land in whichever rounds come
next (how much depends on where the far dues fall against the wheel's slot boundaries, so on
the time of day). It is the far timers' own cost (each entry moves at most ``levels - 1`` times
over its life), not the measured operations', so :meth:`Scene.grow` waits it out and says how
much CPU it took (``staging_cpu_s``, reported per size beside the figure).

Guaranteed: a round returns the process CPU time per operation and how many cancelled timers
fired anyway (``leaked``, which must be 0); an engine cancel that does not return ``CANCELED``
fails the round. Not guaranteed: that a size fits in memory; :func:`too_big` says before it
is tried, from ``MemAvailable`` (None where ``/proc`` is missing: then it is tried).
"""

from __future__ import annotations

import asyncio
import gc
import os
import random
import time
from collections.abc import Callable, Coroutine
from typing import Any

from bench.compare.inmemory import BATCH, CANCEL_LAG
from bench.compare.measure import Metrics
from bench.compare.subject import HANDLER, new_engine, register

__all__ = ["Scene", "available", "rss", "too_big"]

LEAK = "bench-leak"  #: the engine handler of timers that are cancelled (it must never run)
FAR_FROM = 3600.0  #: seconds from now to the earliest of the N pending dues
FAR_SPAN = 3600.0  #: the N pending dues spread uniformly over this many seconds after FAR_FROM
CHUNK = 100_000  #: the population grows this many timers at a time (bounds the transient lists)
SETTLE = 0.005  #: seconds from the start of a round to its first due
IDLE_SLICE = 0.01  #: a loop is idle when sleeping this long costs under IDLE_CPU of CPU
IDLE_CPU = 0.2  #: the fraction of IDLE_SLICE an idle loop may spend (timer checks, noise)
IDLE_WAIT = 120.0  #: seconds settle() waits at most for a loop to go idle
PAIR_BYTES = 1000  #: bytes per pending pair (engine timer + TimerHandle) assumed before measuring
MARGIN = 1.3  #: headroom on the memory estimate (allocator slack, the rounds' own timers)
MEASURED_FROM = 100_000  #: the measured bytes per pair replace PAIR_BYTES from this many pending
SEED = 7  #: the pending dues are the same in every run


class Relay:
    """The one callback of every timer of the rounds: calls whatever this round counts."""

    __slots__ = ("target",)

    def __init__(self) -> None:
        self.target: Callable[[], None] = _never

    def fire(self, _: object = None) -> None:
        self.target()


def _never() -> None:
    raise AssertionError("a timer of the rounds fired outside a round")


class Scene:
    """The asyncio loop with N handles in its heap and the engine with N timers, side by side."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.engine_loop = asyncio.new_event_loop()
        self.relay = Relay()
        self.leaked = 0
        self.engine = new_engine(None, tick=0.001)
        register(self.engine, self.relay.fire)
        register(self.engine, self._leak, LEAK)
        self.on_engine(self.engine.start())
        self.pending = 0
        self.rng = random.Random(SEED)
        self.rss0 = rss()

    def _leak(self, _: object = None) -> None:
        self.leaked += 1

    def on_loop(self, coro: Coroutine[Any, Any, Any]) -> Any:
        asyncio.set_event_loop(self.loop)
        return self.loop.run_until_complete(coro)

    def on_engine(self, coro: Coroutine[Any, Any, Any]) -> Any:
        asyncio.set_event_loop(self.engine_loop)
        return self.engine_loop.run_until_complete(coro)

    def grow(self, n: int) -> float:
        """Add pending timers to both sides until each holds ``n``, freeze them, and wait out
        the engine's idle staging; returns the CPU seconds that staging took."""
        while self.pending < n:
            k = min(CHUNK, n - self.pending)
            dues = [FAR_FROM + FAR_SPAN * self.rng.random() for _ in range(k)]
            self.on_loop(_loop_hold(dues))
            self.on_engine(_engine_hold(self.engine, dues))
            self.pending += k
        gc.collect()
        gc.freeze()
        staging: float = self.on_engine(settle())
        return staging

    def fire(self, on_engine: bool, offs: list[float]) -> Metrics:
        """One schedule + fire round of ``len(offs)`` timers due at ``offs`` from now."""
        if on_engine:
            return self.on_engine(_engine_fire(self.engine, self.relay, offs))  # type: ignore[no-any-return]
        return self.on_loop(_loop_fire(self.relay, offs))  # type: ignore[no-any-return]

    def cancel(self, on_engine: bool, offs: list[float], window: float) -> Metrics:
        """One schedule + cancel round, timed until a timer due after all of them fired."""
        if on_engine:
            return self.on_engine(_engine_cancel(self, offs, window))  # type: ignore[no-any-return]
        return self.on_loop(_loop_cancel(self, offs, window))  # type: ignore[no-any-return]

    def close(self) -> None:
        """Close the engine and both loops and unfreeze the collector (the measuring subprocess
        skips this: it exits at once instead)."""
        self.on_engine(self.engine.close())
        for loop in (self.loop, self.engine_loop):
            loop.close()
        asyncio.set_event_loop(None)
        gc.unfreeze()

    def warm_up(self, offs: list[float], window: float) -> None:
        """One unrecorded round of each kind on each side: the first round of a process pays
        for imports, code warming up and first allocations, which belong to no size."""
        for on_engine in (True, False):
            self.fire(on_engine, offs)
            self.cancel(on_engine, offs, window)

    def bytes_per_pair(self) -> float | None:
        """What a pending pair (engine timer + TimerHandle) cost so far in RSS; None below
        :data:`MEASURED_FROM` pending, where the process's own noise would dominate."""
        grown = rss() - self.rss0
        if self.pending < MEASURED_FROM or grown <= 0:
            return None
        return grown / self.pending


async def _loop_hold(dues: list[float]) -> None:
    loop = asyncio.get_running_loop()
    base = loop.time()
    for d in dues:
        loop.call_at(base + d, _never)


async def _engine_hold(engine: Any, dues: list[float]) -> None:
    base = time.time()
    for i in range(0, len(dues), BATCH):
        await engine.schedule_many([{"handler": LEAK, "at": base + d} for d in dues[i : i + BATCH]])


async def settle() -> float:
    """Sleep in slices until one costs this process almost no CPU (its loop has nothing left
    to do); returns the CPU seconds spent before that slice. Raises ``TimeoutError`` after
    :data:`IDLE_WAIT` seconds."""
    start = time.process_time()
    deadline = time.monotonic() + IDLE_WAIT
    while True:
        c0 = time.process_time()
        await asyncio.sleep(IDLE_SLICE)
        if time.process_time() - c0 < IDLE_SLICE * IDLE_CPU:
            return c0 - start
        if time.monotonic() > deadline:
            raise TimeoutError(f"the loop was still busy after {IDLE_WAIT:g} s")


def rss() -> int:
    """Resident bytes of this process (0 where /proc is missing)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


def available() -> int | None:
    """``MemAvailable`` in bytes (None where /proc/meminfo is missing)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def too_big(scene: Scene, n: int) -> str | None:
    """Why growing to ``n`` pending would not fit in memory (None: it fits, or cannot tell)."""
    need = (n - scene.pending) * (scene.bytes_per_pair() or PAIR_BYTES) * MARGIN
    free = available()
    if free is None or need <= free:
        return None
    return f"does not fit: needs about {need / 1e9:.1f} GB more, {free / 1e9:.1f} GB available"


# ---------------------------------------------------------------------------------------------
# the rounds: each returns the CPU per operation


def _metrics(c0: float, m: int, leaked: int) -> Metrics:
    cpu = time.process_time() - c0
    return {"cpu_per_timer": cpu / m, "cpu_seconds": cpu, "leaked": leaked}


async def _loop_fire(relay: Relay, offs: list[float]) -> Metrics:
    loop = asyncio.get_running_loop()
    await settle()
    done = _countdown(relay, len(offs))
    call_at, fire = loop.call_at, relay.fire
    c0 = time.process_time()
    base = loop.time()
    for o in offs:
        call_at(base + o, fire)
    await done
    return _metrics(c0, len(offs), 0)


async def _engine_fire(engine: Any, relay: Relay, offs: list[float]) -> Metrics:
    await settle()
    done = _countdown(relay, len(offs))
    schedule = engine.schedule
    c0 = time.process_time()
    base = time.time()
    for o in offs:
        await schedule(HANDLER, at=base + o)
    await done
    return _metrics(c0, len(offs), 0)


async def _loop_cancel(scene: Scene, offs: list[float], window: float) -> Metrics:
    loop = asyncio.get_running_loop()
    await settle()
    m, leaked = len(offs), scene.leaked
    done = _countdown(scene.relay, 1)
    call_at, leak = loop.call_at, scene._leak
    handles: list[asyncio.TimerHandle] = []
    c0 = time.process_time()
    base = loop.time() + SETTLE
    for i, o in enumerate(offs):
        handles.append(call_at(base + o, leak))
        if i >= CANCEL_LAG:
            handles[i - CANCEL_LAG].cancel()
    for h in handles[max(0, m - CANCEL_LAG) :]:
        h.cancel()
    call_at(base + window + SETTLE, scene.relay.fire)  # after every cancelled one's due
    await done
    return _metrics(c0, m, scene.leaked - leaked)


async def _engine_cancel(scene: Scene, offs: list[float], window: float) -> Metrics:
    from wheel_engine import CancelResult

    await settle()
    m, leaked = len(offs), scene.leaked
    done = _countdown(scene.relay, 1)
    schedule, cancel = scene.engine.schedule, scene.engine.cancel
    keys: list[str] = []
    missed = 0
    c0 = time.process_time()
    base = time.time() + SETTLE
    for i, o in enumerate(offs):
        keys.append((await schedule(LEAK, at=base + o)).key)
        if i >= CANCEL_LAG and await cancel(keys[i - CANCEL_LAG]) is not CancelResult.CANCELED:
            missed += 1
    for k in keys[max(0, m - CANCEL_LAG) :]:
        if await cancel(k) is not CancelResult.CANCELED:
            missed += 1
    await schedule(HANDLER, at=base + window + SETTLE)
    await done
    if missed:
        raise AssertionError(f"{missed} of {m} cancels did not return CANCELED")
    return _metrics(c0, m, scene.leaked - leaked)


def _countdown(relay: Relay, n: int) -> asyncio.Future[None]:
    """A future set on the ``n``-th call of ``relay`` from now."""
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    left = n

    def tick() -> None:
        nonlocal left
        left -= 1
        if left == 0:
            relay.target = _never
            done.set_result(None)

    relay.target = tick
    return done
