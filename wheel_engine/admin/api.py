"""The part of the engine's public API the admin commands call, as a protocol.

The admin server sits outside the engine: it is given an engine and calls only these public
methods of :class:`~wheel_engine.Engine`, which satisfies this protocol as it is. Typing the
commands against it rather than the class keeps the admin package below the engine.
"""

from __future__ import annotations

from collections.abc import Coroutine
from datetime import datetime
from typing import Any, Literal, Protocol

from wheel_engine.model import CancelResult, TimerInfo, TimerState

__all__ = ["EngineAPI"]


class EngineAPI(Protocol):
    """``Engine``'s public methods the admin commands use (see their docstrings there)."""

    @property
    def path(self) -> str | None: ...

    def schedule(
        self,
        handler: str,
        *,
        at: datetime | float | None = None,
        delay: float | None = None,
        payload: Any = None,
        key: str | None = None,
        on_conflict: Literal["replace", "keep", "error"] = "replace",
    ) -> Coroutine[Any, Any, TimerInfo]: ...

    async def cancel(self, key: str, *, version: int | None = None) -> CancelResult: ...

    def get(self, key: str) -> TimerInfo | None: ...

    async def lookup(self, key: str) -> TimerInfo | None: ...

    def timers(
        self, state: TimerState | str | None = None, handler: str | None = None
    ) -> list[TimerInfo]: ...

    def stats(self) -> dict[str, Any]: ...

    async def redrive(self, key: str, *, at: datetime | float | None = None) -> TimerInfo: ...

    async def compact(self) -> None: ...

    async def schedule_recurring(
        self,
        name: str,
        handler: str,
        *,
        cron: str | None = ...,
        every: float | None = ...,
        tz: str = ...,
        payload: Any = ...,
        catch_up: Literal["latest", "all", "skip"] = ...,
        overlap: bool = ...,
        start: datetime | float | None = ...,
    ) -> Any: ...

    async def cancel_recurring(self, name: str, *, version: int | None = None) -> bool: ...
