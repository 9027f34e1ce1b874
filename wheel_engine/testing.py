"""Test helpers for code that uses wheel-engine: a virtual clock that moves time instantly.

    clock = VirtualClock()
    engine = Engine(None, clock=clock)
    async with engine:
        await engine.schedule("h", delay=3600)
        await clock.advance(3600)      # the timer has fired; no real hour went by

``advance`` runs every callback due on the way, in time order, and lets the event loop settle
after each one (tasks run until they wait on something), so handlers complete within the call.
Like trio's MockClock, nothing sleeps in real time unless a handler waits on real I/O.

``Engine.close(grace)`` waits for running handlers on the engine's clock: with a virtual clock
and a handler still sleeping, advance the clock while closing (or close with ``grace=0``).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable

from wheel_engine.clock import Quiescable

__all__ = ["VirtualClock", "settle"]

DEFAULT_START = 1_767_225_600.0  # 2026-01-01T00:00:00Z: a realistic epoch, far from zero


async def settle(max_rounds: int = 100_000) -> None:
    """Yield to the loop until no callback is ready (tasks are all waiting on something).

    On loops that do not expose their ready queue (uvloop) it yields a fixed number of times.
    """
    loop = asyncio.get_running_loop()
    ready = getattr(loop, "_ready", None)
    if ready is None:
        for _ in range(200):
            await asyncio.sleep(0)
        return
    for _ in range(max_rounds):
        await asyncio.sleep(0)
        if not ready:
            return


class _Handle:
    __slots__ = ("callback", "cancelled", "when")

    def __init__(self, when: float, callback: Callable[[], None]) -> None:
        self.when = when
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class VirtualClock:
    """A clock whose time moves only when a test says so.

    It keeps two readings, like a real machine: a monotonic one that timers wait on, and a wall
    clock (``time()``) that is the monotonic one plus an offset. ``advance`` moves both;
    ``jump`` moves only the wall clock, as an administrator setting the clock would.
    """

    def __init__(self, start: float = DEFAULT_START) -> None:
        self._monotonic = 0.0
        self._offset = start
        self._heap: list[tuple[float, int, _Handle]] = []
        self._counter = itertools.count()
        self._engines: list[Quiescable] = []

    # --- the Clock protocol --------------------------------------------------------------
    def time(self) -> float:
        return self._monotonic + self._offset

    def call_at(self, when: float, callback: Callable[[], None]) -> _Handle:
        # max(now, when - offset) rather than now + (when - time()): one rounding instead of
        # three, so the callback reads ``time() == when`` exactly (when and the offset are
        # within a factor of two, as with any realistic epoch) and never a hair before it,
        # which the engine would take for a loop that runs its timers early.
        monotonic_when = max(self._monotonic, when - self._offset)
        handle = _Handle(monotonic_when, callback)
        heapq.heappush(self._heap, (monotonic_when, next(self._counter), handle))
        return handle

    async def sleep(self, seconds: float) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def wake() -> None:
            if not future.done():
                future.set_result(None)

        handle = self.call_at(self.time() + seconds, wake)
        try:
            await future
        finally:
            handle.cancel()

    # --- driving time ----------------------------------------------------------------------
    def attach(self, engine: Quiescable) -> None:
        """Called by an engine using this clock, so ``advance`` can wait for its journal I/O."""
        if engine not in self._engines:
            self._engines.append(engine)

    def detach(self, engine: Quiescable) -> None:
        if engine in self._engines:
            self._engines.remove(engine)

    async def settle(self) -> None:
        """Let every task run until it waits on time (or on I/O the engines do not own)."""
        for _ in range(1000):
            await settle()
            busy = [engine for engine in self._engines if engine.busy()]
            if not busy:
                return
            for engine in busy:
                await engine.quiesce()

    async def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds``, running everything that becomes due, in order."""
        if seconds < 0:
            raise ValueError("time only moves forward; use jump() to set the wall clock back")
        await self.advance_to_monotonic(self._monotonic + seconds)

    async def advance_to(self, wall_time: float) -> None:
        """Move time forward until the wall clock reads ``wall_time``."""
        await self.advance(max(0.0, wall_time - self.time()))

    async def advance_to_monotonic(self, target: float) -> None:
        await self.settle()
        while self._heap and self._heap[0][0] <= target:
            when, _, handle = heapq.heappop(self._heap)
            if handle.cancelled:
                continue
            self._monotonic = max(self._monotonic, when)
            handle.callback()
            await self.settle()
        self._monotonic = max(self._monotonic, target)
        await self.settle()

    def jump(self, seconds: float) -> None:
        """Set the wall clock forward (or back, with a negative value) without moving timers."""
        self._offset += seconds

    def next_deadline(self) -> float | None:
        """The wall time of the earliest armed callback, or None: nothing is waiting on time."""
        while self._heap and self._heap[0][2].cancelled:
            heapq.heappop(self._heap)
        if not self._heap:
            return None
        return self._heap[0][0] + self._offset

    def armed(self) -> int:
        """How many callbacks are waiting on this clock (an idle engine keeps at most one)."""
        return sum(1 for _, _, handle in self._heap if not handle.cancelled)
