"""What the CLI's commands share: opening a journal with clear errors, rows as plain data."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import urllib.parse
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgpack

from journal.errors import JournalCorrupt, JournalError, JournalLocked
from journal.ownfiles import journal_size
from journal.schema import is_sqlite_database
from wheel_engine.cli.output import EXIT_ERROR, EXIT_LOCKED, CliError, fmt_time

if TYPE_CHECKING:
    from journal import Journal
    from wheel_engine import Engine

__all__ = [
    "decode_payload",
    "existing_journal",
    "file_size",
    "open_engine",
    "open_readonly",
    "row_to_dict",
    "translate_error",
    "with_path",
]


def existing_journal(path: str) -> Path:
    """The journal's path, or a ``CliError`` if there is nothing there to read.

    Every command checks this first: opening a missing path for writing would create an empty
    journal, which is never what someone typing a wrong file name wants.
    """
    p = Path(path)
    if not p.exists():
        raise CliError(f"{path}: no such file")
    if p.is_dir():
        raise CliError(f"{path}: is a directory, not a journal")
    if not os.access(p, os.R_OK):
        raise CliError(f"{path}: permission denied")
    if _size(path) and not is_sqlite_database(path):
        raise CliError(f"{path}: not a wheel-engine journal (not an SQLite database)")
    return p


def _size(path: str) -> int:
    """The file's size; a FIFO or a device is refused at once, never opened."""
    try:
        return journal_size(path)
    except JournalError as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:
        raise CliError(f"{path}: {exc.strerror or exc}") from None


def file_size(path: Path) -> int:
    """The journal's size on disk, its write-ahead log included."""
    total = 0
    for suffix in ("", "-wal"):
        with suppress(OSError):
            total += os.path.getsize(f"{path}{suffix}")
    return total


def with_path(path: str, message: str) -> str:
    """``message`` prefixed with ``path``, unless it names the file already."""
    return message if path in message else f"{path}: {message}"


def translate_error(path: str | os.PathLike[str], exc: BaseException) -> CliError:
    """One line a person can act on, for anything opening or reading a journal can raise."""
    if isinstance(exc, CliError):
        return exc
    spath = os.fspath(path)

    def named(message: str) -> str:
        return with_path(spath, message)

    if isinstance(exc, JournalLocked):
        return CliError(
            f"{spath}: the journal is in use by a running engine (it holds the journal's lock); "
            "stop that process first, or use a read-only command (status, list, show, check)",
            code=EXIT_LOCKED,
        )
    if isinstance(exc, JournalCorrupt):
        message = str(exc)
        if exc.seq is not None and str(exc.seq) not in message:
            message = f"record {exc.seq}: {message}"
        if "damaged" not in message and "corrupt" not in message:
            message = f"damaged journal: {message}"
        return CliError(named(message))
    if isinstance(exc, JournalError):
        return CliError(named(str(exc)))
    if isinstance(exc, sqlite3.DatabaseError):
        return CliError(named(f"not a readable wheel-engine journal ({exc})"))
    if isinstance(exc, OSError):
        return CliError(named(str(exc.strerror or exc)))
    return CliError(named(f"{type(exc).__name__}: {exc}"), code=EXIT_ERROR)


@asynccontextmanager
async def open_readonly(path: str) -> AsyncIterator[Journal]:
    """The journal opened read-only: it works while an engine is writing to it."""
    from journal import Journal

    p = existing_journal(path)
    try:
        journal = await Journal.open(p, readonly=True)
    except (JournalError, sqlite3.DatabaseError, OSError) as exc:
        raise translate_error(path, exc) from exc
    try:
        yield journal
    finally:
        with suppress(JournalError, sqlite3.DatabaseError, OSError):
            await journal.close()


@asynccontextmanager
async def open_engine(path: str) -> AsyncIterator[Engine]:
    """An engine on ``path`` with no handlers: it takes the lock, and fires nothing.

    Timers it recovers stay in the journal untouched (unhandled), exactly as they were. Only
    an existing journal is opened: an engine would make a missing or empty file a journal, so
    those, and any file a read-only open does not recognise, are refused before the engine
    touches them (exit 3; the file is left as it was, nothing is created beside it).
    """
    from wheel_engine import Engine

    p = existing_journal(path)
    await asyncio.to_thread(_refuse_foreign, path, p)
    engine = Engine(str(p))
    try:
        await engine.start()
    except (JournalError, sqlite3.DatabaseError, OSError) as exc:
        raise translate_error(path, exc) from exc
    try:
        yield engine
    finally:
        await engine.close(grace=0.0)


def _refuse_foreign(path: str, p: Path) -> None:
    """A ``CliError`` unless ``p`` holds a journal's tables, found without leaving a trace.

    The connection is ``immutable``: SQLite then takes no lock and makes no ``-wal``/``-shm``
    (a plain read-only open of a WAL-mode database leaves both behind). It reads only the
    main file, which is enough: a journal's tables are written there before the file is ever
    switched to WAL (:func:`journal.schema.ensure_schema`).
    """
    from journal.schema import read_meta

    if p.stat().st_size == 0:
        raise CliError(f"{path}: an empty file, not a wheel-engine journal")
    uri = "file:" + urllib.parse.quote(os.path.abspath(p)) + "?mode=ro&immutable=1"
    try:
        con = sqlite3.connect(uri, uri=True)
        try:
            read_meta(con, path)
        finally:
            con.close()
    except (JournalError, sqlite3.DatabaseError) as exc:
        raise translate_error(path, exc) from exc


def decode_payload(payload: bytes | None) -> Any:
    """A stored payload as data; undecodable bytes come back as ``{"undecodable": hex}``."""
    if payload is None:
        return None
    try:
        return msgpack.unpackb(payload, raw=False, strict_map_key=False)
    except Exception:  # any decoding failure: show the bytes instead of failing the command
        return {"undecodable": payload.hex()}


def row_to_dict(row: Any, *, now: float) -> dict[str, Any]:
    """A journal ``TimerRow`` (or an engine ``TimerInfo``) as plain, JSON-ready data."""
    raw_payload = row.payload
    payload = decode_payload(raw_payload) if isinstance(raw_payload, (bytes, type(None))) else None
    if not isinstance(raw_payload, (bytes, type(None))):
        payload = raw_payload  # already decoded (a TimerInfo)
    data: dict[str, Any] = {
        "key": row.key,
        "version": row.version,
        "handler": row.handler,
        "state": row.state.value,
        "due": row.due,
        "due_utc": fmt_time(row.due),
        "overdue_seconds": max(0.0, now - row.due) if row.state.is_live else 0.0,
        "attempts": row.attempts,
        "last_error": row.last_error,
        "payload": payload,
    }
    for extra in ("first_attempt_at", "updated_at"):
        if hasattr(row, extra):
            data[extra] = getattr(row, extra)
    return data
