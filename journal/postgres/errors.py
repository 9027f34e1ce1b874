"""Errors of the PostgreSQL journal, and the one place that turns driver errors into them.

Every error is a :class:`~journal.errors.JournalError`, as with the SQLite journal, so the engine
handles both alike. Messages name the server (host, port, database), never the password.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import psycopg

from journal.errors import JournalError

__all__ = ["LiveKeyConflict", "StoreUnavailable", "describe", "translated"]


class StoreUnavailable(JournalError):
    """The database could not be reached or the statement failed; nothing of it was committed
    unless the error says the outcome is unknown (a connection lost during COMMIT)."""


class LiveKeyConflict(JournalError):
    """``on_conflict="error"`` met a live (PENDING or RUNNING) timer; the batch was not written.
    The engine turns it into its own ``DuplicateKey``."""

    def __init__(self, key: str, version: int) -> None:
        super().__init__(f"key {key!r} names a live timer (version {version})")
        self.key = key
        self.version = version


def describe(url: str) -> str:
    """``host:port/dbname`` of a connection string, for messages (no user, no password)."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.Error:
        return "<unparsable PostgreSQL URL>"
    host = info.get("host") or "localhost"
    return f"{host}:{info.get('port') or 5432}/{info.get('dbname') or ''}"


@contextlib.contextmanager
def translated(where: str, doing: str) -> Iterator[None]:
    """Re-raise driver errors as :class:`StoreUnavailable` naming ``where`` and ``doing``."""
    try:
        yield
    except psycopg.Error as exc:
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise StoreUnavailable(f"PostgreSQL error ({text}) while {doing}: {where}") from exc
