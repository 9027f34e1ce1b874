"""Read a live SQLite journal's records from another connection, read-only (the tests of the
next occurrence committed with its predecessor's attempt, #25)."""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path

from journal import Attempt, Record, Schedule
from journal.codec import open_record
from wheel_engine.recurring.rule import occurrence_of


def records_of(path: Path | str) -> list[Record]:
    """Every record committed to the journal at ``path`` so far, oldest first."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = con.execute("SELECT seq, body FROM records ORDER BY seq").fetchall()
    finally:
        con.close()
    return [open_record(body, seq) for seq, body in rows]


def attempted(records: list[Record]) -> set[str]:
    """The occurrence keys with an ``Attempt`` record."""
    return {r.key for r in records if isinstance(r, Attempt) and occurrence_of(r.key)}


def scheduled(records: list[Record]) -> Counter[str]:
    """How many ``Schedule`` records each occurrence key has."""
    return Counter(r.key for r in records if isinstance(r, Schedule) and occurrence_of(r.key))
