"""The engine's exceptions. Every one is a :class:`WheelEngineError`; the journal's errors come
from the journal package and are re-exported. Where an error also means what a built-in
exception means (an unknown name, a missing key), it is that built-in too, so code that catches
``LookupError`` or ``KeyError`` keeps working."""

from __future__ import annotations

from journal.errors import (
    JournalCorrupt,
    JournalError,
    JournalLocked,
    UnusableConnection,
    WheelEngineError,
)

__all__ = [
    "DuplicateKey",
    "EngineError",
    "JournalCorrupt",
    "JournalError",
    "JournalLocked",
    "PermanentError",
    "TimerNotFound",
    "UnknownHandler",
    "UnusableConnection",
    "WheelEngineError",
]


class EngineError(WheelEngineError):
    """The engine was used wrongly: not started, already closed, closing."""


class PermanentError(WheelEngineError):
    """Raised by a handler for a failure that no retry can heal: the timer goes DEAD at once."""


class UnknownHandler(WheelEngineError, LookupError):
    """A handler name that is not registered with this engine."""


class DuplicateKey(WheelEngineError, KeyError):
    """``schedule(..., on_conflict="error")`` with a key that names a live timer."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class TimerNotFound(WheelEngineError, KeyError):
    """``redrive(key)`` of a key the engine holds no timer for. Its one argument is the key, and
    it prints as ``KeyError`` does, so code written for the bare ``KeyError`` sees no change."""
