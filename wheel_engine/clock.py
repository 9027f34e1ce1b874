"""The engine's time source.

Due times are wall-clock epoch seconds, because they must mean the same thing after a restart.
Waiting is done on the event loop's monotonic clock, so a wall clock that jumps does not stretch
or shrink a wait; the engine re-checks the wall clock before every firing and never fires early.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Protocol


class Cancellable(Protocol):
    def cancel(self) -> None: ...


class Quiescable(Protocol):
    """What a clock may ask of an engine attached to it: is work in flight off the loop
    (journal commits, thread handlers), and wait for it."""

    def busy(self) -> bool: ...

    def quiesce(self) -> Awaitable[None]: ...


class Clock(Protocol):
    """What the engine needs of time. ``wheel_engine.testing.VirtualClock`` is the test double."""

    def time(self) -> float:
        """Wall-clock time, epoch seconds."""
        ...

    def call_at(self, when: float, callback: Callable[[], None]) -> Cancellable:
        """Run ``callback`` on the running loop once the wall clock should read ``when``."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Sleep on this clock (used for close's grace period)."""
        ...

    def attach(self, engine: Quiescable) -> None:
        """Called by an engine once it has started on this clock: a clock that moves time by
        itself (a test's) can then wait for the engine's off-loop work. Real clocks ignore it."""
        ...

    def detach(self, engine: Quiescable) -> None:
        """Called by an engine once it has closed (undoes :meth:`attach`)."""
        ...


class SystemClock:
    """The real clock: ``time.time()`` for the wall, the running loop's timers for waiting."""

    __slots__ = ()

    def time(self) -> float:
        return time.time()

    def call_at(self, when: float, callback: Callable[[], None]) -> Cancellable:
        loop = asyncio.get_running_loop()
        # Convert once, at arming time: the wait runs on the loop's monotonic clock. The wall
        # clock is read first: the time that passes before the loop's clock is read then makes
        # the wait longer, never shorter (read the other way round, a callback armed for a due
        # ran that much before it, found it not due yet, and waited another loop timeout).
        wall = time.time()
        return loop.call_at(loop.time() + max(0.0, when - wall), callback)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    def attach(self, engine: Quiescable) -> None:
        """Real time does not wait for anyone: nothing to do."""

    def detach(self, engine: Quiescable) -> None:
        """Nothing to undo."""


async def wait_at_most(clock: Clock, event: asyncio.Event, seconds: float) -> None:
    """Wait until ``event`` is set, or ``seconds`` pass on ``clock``, whichever is first."""
    waiting = asyncio.ensure_future(event.wait())
    timeout = asyncio.ensure_future(clock.sleep(seconds))
    try:
        await asyncio.wait({waiting, timeout}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiting.cancel()
        timeout.cancel()
