"""The engine's exceptions. Journal errors come from the journal package and are re-exported."""

from __future__ import annotations

from journal.errors import JournalCorrupt, JournalError, JournalLocked

__all__ = [
    "DuplicateKey",
    "EngineError",
    "JournalCorrupt",
    "JournalError",
    "JournalLocked",
    "PermanentError",
    "UnknownHandler",
]


class EngineError(Exception):
    """The engine was used wrongly: not started, already closed, closing."""


class PermanentError(Exception):
    """Raised by a handler for a failure that no retry can heal: the timer goes DEAD at once."""


class UnknownHandler(LookupError):
    """A handler name that is not registered with this engine."""


class DuplicateKey(KeyError):
    """``schedule(..., on_conflict="error")`` with a key that names a live timer."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""
