"""Errors of the PostgreSQL journal, and the one place that turns driver errors into them.

Every error is a :class:`~journal.errors.JournalError`, as with the SQLite journal, so the engine
handles both alike. Messages name the server (host, port, database), never the password.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import psycopg

from journal.errors import JournalError

__all__ = ["LiveKeyConflict", "StoreUnavailable", "describe", "translated"]

#: SQLSTATE classes worth a retry: connection exception, operator intervention (shutdown,
#: starting up), insufficient resources, transaction rollback (serialization, deadlock).
_TRANSIENT_CLASSES = frozenset({"08", "57", "53", "40"})


class StoreUnavailable(JournalError):
    """The database could not be reached or the statement failed; nothing of it was committed
    unless the error says the outcome is unknown (a connection lost during COMMIT).

    It chains no driver error (whose text may quote the connection string): ``sqlstate`` keeps
    the server's error code, if any."""

    sqlstate: str | None = None

    @property
    def transient(self) -> bool:
        """The server could not be reached, or refused for now (the connection failed or was
        lost, the server is shutting down or starting, too many connections, a serialization
        failure): trying the same statement again later may succeed. False for an error the
        statement itself caused (bad data), which would fail the same way again."""
        return self.sqlstate is None or self.sqlstate[:2] in _TRANSIENT_CLASSES


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
def translated(where: str, doing: str, scrub: Callable[[str], str] | None = None) -> Iterator[None]:
    """Re-raise driver errors as :class:`StoreUnavailable` naming ``where`` and ``doing``.

    ``scrub`` masks the password in the driver's text (``Target.scrub``); the driver's error is
    masked in place too, since Python keeps it as the new error's ``__context__``, and is not
    shown as its cause."""
    try:
        yield
    except psycopg.Error as exc:
        if scrub is not None:
            _mask(exc, scrub)
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        error = StoreUnavailable(f"PostgreSQL error ({text}) while {doing}: {where}")
        error.sqlstate = exc.sqlstate
        raise error from None


def _mask(exc: BaseException, scrub: Callable[[str], str]) -> None:
    """Mask the password in ``exc`` and the errors it chains (their args are their text)."""
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        link.args = tuple(scrub(a) if isinstance(a, str) else a for a in link.args)
        link = link.__cause__ or link.__context__
