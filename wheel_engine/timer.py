"""The engine's record of one timer: one mutable object per key, shared by every index."""

from __future__ import annotations

import asyncio
from typing import Any

from wheel_engine.model import TimerInfo, TimerState

# Why a running handler is being interrupted (``Timer.interrupt``).
INTERRUPT_CANCEL = "cancel"  #: engine.cancel() asked for it
INTERRUPT_TIMEOUT = "timeout"  #: the handler ran past its timeout


class Timer:
    """One version of one key. ``__slots__`` keeps a pending timer at about 150 bytes.

    ``entry`` is the wheel entry while the timer waits in the wheel (None otherwise), ``task``
    the worker task while its handler runs, ``interrupt`` why that task was cancelled.
    """

    __slots__ = (
        "attempts",
        "due",
        "entry",
        "first_attempt_at",
        "handler",
        "interrupt",
        "key",
        "last_error",
        "payload",
        "state",
        "task",
        "updated_at",
        "version",
    )

    def __init__(
        self,
        key: str,
        version: int,
        handler: str,
        due: float,
        payload: Any,
        state: TimerState = TimerState.PENDING,
        attempts: int = 0,
        last_error: str | None = None,
        first_attempt_at: float | None = None,
        updated_at: float = 0.0,
    ) -> None:
        self.key = key
        self.version = version
        self.handler = handler
        self.due = due
        self.payload = payload
        self.state = state
        self.attempts = attempts
        self.last_error = last_error
        self.first_attempt_at = first_attempt_at
        self.updated_at = updated_at
        self.entry: Any = None
        self.task: asyncio.Task[Any] | None = None
        self.interrupt: str | None = None

    def info(self) -> TimerInfo:
        return TimerInfo(
            self.key,
            self.version,
            self.handler,
            self.due,
            self.payload,
            self.state,
            self.attempts,
            self.last_error,
        )
