"""The journal's tables, and the checks that tell a wheel-engine journal from any other file.

Tables (schema_version 2; schema 1 had the same tables, with unsealed bodies)::

    records  (seq INTEGER PRIMARY KEY, kind INTEGER NOT NULL, body BLOB NOT NULL)
    snapshot (key TEXT PRIMARY KEY, state INTEGER NOT NULL, updated_at REAL NOT NULL,
              body BLOB NOT NULL) WITHOUT ROWID
    meta     (name TEXT PRIMARY KEY, value)

The file is created with ``auto_vacuum = INCREMENTAL`` so that compaction can hand freed pages
back to the file system (see :mod:`journal.compaction`).

``records.body`` and ``snapshot.body`` are sealed blobs (:mod:`journal.codec`): each carries a
CRC-32 that covers the row's other columns too. ``meta`` holds ``schema_version``,
``snapshot_seq`` (the highest seq folded into ``snapshot``), ``max_version`` (the highest timer
version folded into ``snapshot``, kept even when that timer was dropped), ``journal_id`` (8
random bytes naming this journal, for its high-water mark: :mod:`journal.watermark`),
``snapshot_rows`` (how many rows ``snapshot`` has: a deleted or added row is damage too) and
``checksum`` (of the others, :func:`journal.checksum.meta_checksum`). ``PRAGMA
application_id`` is set too, as a second marker. A schema-1 journal is migrated in place by the
first writable open (:mod:`journal.migration`); read-only opens read it as it is.

Everything here is synchronous ``sqlite3``; the journal runs it in a worker thread.
"""

from __future__ import annotations

import math
import os
import sqlite3
import urllib.parse
from collections.abc import Callable
from typing import Final, TypeVar

from journal.checksum import meta_sealed, seal_meta
from journal.errors import JournalCorrupt, JournalError
from journal.meta import MetaInfo
from journal.migration import migrate
from journal.objects import expected_objects, schema_objects, unexpected
from journal.ownfiles import journal_size, own_path, refuse_planted, secure_sidecars
from journal.watermark import new_journal_id

__all__ = [
    "APPLICATION_ID",
    "SCHEMA_VERSION",
    "MetaInfo",  # from journal.meta, kept here for the journal's imports
    "connect_ro",
    "create_file",
    "ensure_schema",
    "is_sqlite_database",
    "raise_for",
    "read_meta",
    "secure_sidecars",  # from journal.ownfiles, kept here for the journal's imports
]

#: The schema this code writes. 1: bodies without checksums; 2: sealed bodies, journal_id and
#: a checksum of ``meta``.
SCHEMA_VERSION: Final = 2
#: ``PRAGMA application_id``: "WHEE" in ASCII.
APPLICATION_ID: Final = 0x57484545
FILE_MODE: Final = 0o600

_TABLES: Final = frozenset({"records", "snapshot", "meta"})

T = TypeVar("T")

_DDL: Final = (
    "CREATE TABLE records (seq INTEGER PRIMARY KEY, kind INTEGER NOT NULL, body BLOB NOT NULL)",
    "CREATE TABLE snapshot (key TEXT PRIMARY KEY, state INTEGER NOT NULL,"
    " updated_at REAL NOT NULL, body BLOB NOT NULL) WITHOUT ROWID",
    "CREATE TABLE meta (name TEXT PRIMARY KEY, value)",
)


#: How the sqlite3 module says a TEXT value is not UTF-8 (it raises OperationalError).
_BAD_TEXT: Final = "Could not decode to UTF-8"


def not_a_journal(path: str) -> JournalError:
    return JournalError(f"not a wheel-engine journal: {path}")


def raise_for(exc: sqlite3.Error, path: str, doing: str) -> JournalError:
    """Turn a sqlite3 error into the journal's own error, naming the file."""
    text = str(exc)
    # Errors raised by the sqlite3 module itself (not by SQLite) have no sqlite_errorname.
    name = getattr(exc, "sqlite_errorname", "")
    if isinstance(exc, sqlite3.DatabaseError) and (
        "malformed" in text
        or "corrupt" in text
        or name == "SQLITE_CORRUPT"
        or text.startswith(_BAD_TEXT)  # a damaged byte in a text column (a key)
    ):
        return JournalCorrupt(f"journal is damaged ({text}) while {doing}: {path}")
    if "file is not a database" in text or name == "SQLITE_NOTADB":
        return not_a_journal(path)
    return JournalError(f"journal error ({text}) while {doing}: {path}")


def check_header(path: str) -> None:
    """Recognise a journal before SQLite opens it for real (and could leave a ``-wal``/``-shm``
    beside a file that is not ours).

    An empty file passes (a writable open makes it a journal). Anything else must be a regular
    file (a FIFO is refused at once, never opened) holding an SQLite database with our
    ``application_id``, or with none (0: set by no wheel-engine) and our tables. The database is
    read through an ``immutable`` connection, which takes no lock, creates no file and, being
    SQLite's own, closes its descriptor without dropping the locks this process's other
    connections hold on the journal (:func:`~journal.ownfiles.journal_size` says why that
    matters).
    """
    try:
        size = journal_size(path)
        readable = os.access(path, os.R_OK)
    except FileNotFoundError:
        raise JournalError(f"no such journal: {path}") from None
    except OSError as exc:
        raise JournalError(f"cannot read journal ({exc}): {path}") from exc
    if not readable:
        raise JournalError(f"cannot read journal (permission denied): {path}")
    if size and not _is_ours(path):
        raise not_a_journal(path)


def is_sqlite_database(path: str) -> bool:
    """Whether the regular file at ``path`` holds an SQLite database (read as in
    :func:`check_header`: immutable, no lock taken or dropped, no file created)."""
    return (
        _sqlite_read(path, lambda con: con.execute("PRAGMA schema_version").fetchone()) is not None
    )


def _is_ours(path: str) -> bool:
    """Whether ``path`` is a journal. First through an immutable connection, which reads the main
    file alone. A journal in use has a WAL beside it, whose newer pages that read does not see,
    and a checkpoint may be rewriting the main file under it (a torn read): where the WAL and
    its index are both there, and no link is planted among them, a "no" is asked again through
    a plain read-only connection, which reads them consistently and creates no file."""

    def ours(con: sqlite3.Connection) -> bool:
        (app_id,) = con.execute("PRAGMA application_id").fetchone()
        return bool(app_id == APPLICATION_ID or (app_id == 0 and _tables(con) == _TABLES))

    if _sqlite_read(path, ours):
        return True
    if not all(os.path.isfile(own_path(path, side)) for side in ("-wal", "-shm")):
        return False
    refuse_planted(path)
    return bool(_sqlite_read(path, ours, immutable=False))


def _sqlite_read(
    path: str, read: Callable[[sqlite3.Connection], T], *, immutable: bool = True
) -> T | None:
    """``read(connection)`` on an immutable read-only connection (``immutable=False``: a plain
    read-only one), or None if SQLite cannot read the file as a database."""
    flags = "mode=ro&immutable=1" if immutable else "mode=ro"
    uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?" + flags
    try:
        con = sqlite3.connect(uri, uri=True)
        try:
            return read(con)
        finally:
            con.close()
    except sqlite3.Error:
        return None


def create_file(path: str) -> bool:
    """Create an empty journal file with mode 0o600 if it is missing. True if created."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, FILE_MODE)
    except FileExistsError:
        return False
    except OSError as exc:
        raise JournalError(f"cannot create journal ({exc}): {path}") from exc
    os.close(fd)
    return True


def connect_ro(path: str) -> sqlite3.Connection:
    """A read-only connection (no lock needed; works while an engine writes, thanks to WAL)."""
    if not os.path.exists(path):
        raise JournalError(f"no such journal: {path}")
    check_header(path)
    refuse_planted(path)
    uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?mode=ro"
    try:
        con = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
        con.execute("PRAGMA busy_timeout = 5000")
    except sqlite3.Error as exc:
        raise raise_for(exc, path, "opening") from exc
    return con


def _tables(con: sqlite3.Connection) -> set[str]:
    rows = con.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
    ).fetchall()
    return {str(r[0]) for r in rows}


def read_meta(con: sqlite3.Connection, path: str) -> MetaInfo:
    """Check that ``con`` is a journal this code can read, and return its meta.

    Raises :class:`JournalError` for a foreign or newer file. Call inside a read transaction
    when the numbers must agree with later reads.
    """
    try:
        objects = schema_objects(con)
        tables = {n for kind, n in objects if kind == "table" and not n.startswith("sqlite_")}
        if tables != _TABLES:
            raise not_a_journal(path)
        extra = unexpected(objects, expected_objects(_DDL))
        if extra:  # a trigger or a constraint would run on our writes: refuse before any
            raise JournalCorrupt(
                f"journal holds schema objects the engine did not create: {'; '.join(extra)} "
                f"(refused before anything is written): {path}"
            )
        meta = dict(con.execute("SELECT name, value FROM meta").fetchall())
        version = meta.get("schema_version")
        if type(version) is not int:
            raise not_a_journal(path)
        if version > SCHEMA_VERSION:
            raise JournalError(
                f"journal was written by a newer wheel-engine (schema_version {version}, "
                f"this one reads up to {SCHEMA_VERSION}): {path}"
            )
        snapshot_seq = meta.get("snapshot_seq", 0)
        max_version = meta.get("max_version", 0)
        journal_id = meta.get("journal_id")
        snapshot_rows = meta.get("snapshot_rows")
        if type(snapshot_seq) is not int or type(max_version) is not int:
            raise JournalCorrupt(f"journal meta is damaged: {path}")
        if version >= 2 and (
            type(journal_id) is not bytes or type(snapshot_rows) is not int or not meta_sealed(meta)
        ):
            raise JournalCorrupt(f"journal meta is damaged (checksum mismatch): {path}")
        count, max_seq = con.execute(
            "SELECT count(*), max(seq) FROM records WHERE seq > ?", (snapshot_seq,)
        ).fetchone()
    except sqlite3.Error as exc:
        raise raise_for(exc, path, "reading the schema") from exc
    return MetaInfo(
        schema_version=version,
        snapshot_seq=snapshot_seq,
        max_version=max_version,
        max_seq=max(int(max_seq or 0), snapshot_seq),
        tail_records=int(count),
        journal_id=journal_id if version >= 2 else None,
        snapshot_rows=snapshot_rows if version >= 2 else None,
        compacted_at=_compacted_at(meta.get("compacted_at")),
    )


def _compacted_at(value: object) -> float | None:
    """``meta``'s compaction time, if it is one (it is only shown, never acted on)."""
    if type(value) is float and math.isfinite(value):
        return value
    return None


def ensure_schema(path: str) -> MetaInfo:
    """Writable open, step 1 (in a thread, with the lock held): make ``path`` a journal.

    An empty (0-byte) file, just created or left empty, gets the schema; anything else must
    already be a journal of a schema this code reads: an SQLite database without tables or with
    other tables is "not a wheel-engine journal" (the schema is created in the very transaction
    that writes the file's first page, so a journal never exists without its tables). The file
    is then switched to WAL (persistent).
    """
    check_header(path)
    refuse_planted(path)
    try:
        fresh = os.path.getsize(path) == 0
    except OSError as exc:
        raise JournalError(f"cannot read journal ({exc}): {path}") from exc
    try:
        con = sqlite3.connect(path, isolation_level=None)
    except sqlite3.Error as exc:
        raise raise_for(exc, path, "opening") from exc
    try:
        try:
            if fresh:  # only possible before the first table exists
                con.execute("PRAGMA auto_vacuum = INCREMENTAL")
            con.execute("BEGIN IMMEDIATE")
            tables = _tables(con)
            if fresh and not tables:
                for ddl in _DDL:
                    con.execute(ddl)
                con.executemany(
                    "INSERT INTO meta (name, value) VALUES (?, ?)",
                    [
                        ("schema_version", SCHEMA_VERSION),
                        ("snapshot_seq", 0),
                        ("max_version", 0),
                        ("journal_id", new_journal_id()),
                        ("snapshot_rows", 0),
                    ],
                )
                seal_meta(con)
                con.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            info = read_meta(con, path)
            if info.schema_version < SCHEMA_VERSION:
                migrate(con, info, path)
                info = read_meta(con, path)
            con.execute("COMMIT")
            mode = con.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise JournalError(f"cannot switch the journal to WAL mode ({mode}): {path}")
        except sqlite3.Error as exc:
            raise raise_for(exc, path, "opening") from exc
    finally:
        con.close()
    secure_sidecars(path)
    return info
