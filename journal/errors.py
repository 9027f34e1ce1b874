"""Errors raised by the journal. They name the file and, where there is one, the record."""

from __future__ import annotations


class WheelEngineError(Exception):
    """The base of every error the library raises, so ``except WheelEngineError`` catches them
    all. It lives here, in the journal package, because the engine's package imports this one and
    never the other way round; ``wheel_engine.errors`` re-exports it."""


class JournalError(WheelEngineError):
    """The journal cannot be used: not a journal, a newer schema, disk full, read-only, closed."""


class JournalLocked(JournalError):
    """Another process (an engine or a writing CLI command) holds the journal's lock."""


class JournalCorrupt(JournalError):
    """A record or the database itself is damaged. ``seq`` names the record when it is known."""

    def __init__(self, message: str, *, seq: int | None = None) -> None:
        super().__init__(message)
        self.seq = seq


class UnusableConnection(JournalError, ValueError):
    """A connection given to write in its transaction (``connection=``) cannot be used: it
    reaches another database than the journal's, its transaction has failed, or autocommit is
    on with no transaction open. Nothing was written."""
