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
    "IllegalTransition",
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


class IllegalTransition(WheelEngineError):
    """A timer was asked for a state change its state does not allow: an engine bug, never a
    user's mistake (``wheel_engine.timer.Timer`` lists the legal ones). The message names the
    timer's key and version, the transition and the states, never the payload. ``legal``: the
    states it is allowed from, comma-separated ("" for none)."""

    def __init__(self, key: str, version: int, transition: str, state: str, legal: str) -> None:
        allowed = f"only from {legal}" if legal else "from no state"
        super().__init__(
            f"timer {key!r} (version {version}): {transition} is not allowed from {state}"
            f" ({allowed})"
        )
        self.key = key
        self.version = version
        self.transition = transition
        self.from_state = state
        self.legal = legal
