"""``PostgresClient``: the CLI's synchronous handle on a PostgreSQL journal.

One plain connection (autocommit, prepared statements off). It never creates or alters the
schema: a database without a wheel-engine journal is refused with one clear error. Its writes
(schedule, cancel, redrive) are the very statements the engines run, and are safe while
engines run: ownership and fencing live in the database, not in a process.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from journal.errors import JournalError
from journal.postgres import reads, writes
from journal.postgres.errors import describe, translated
from journal.postgres.reads import Summary
from journal.postgres.rows import StoredTimer
from journal.postgres.schema import read_partitions_sync
from journal.postgres.writes import CancelOutcome, Requests, Scheduled, ScheduleRequest

__all__ = ["PostgresClient"]

#: Seconds to wait for the server before the CLI gives up with one line.
CONNECT_TIMEOUT = 10


class PostgresClient(Requests):
    """An open client. Create with :meth:`connect`; close with :meth:`close`."""

    def __init__(self, url: str, conn: psycopg.Connection[Any], partitions: int) -> None:
        self.url = url
        self.where = describe(url)
        self._partitions = partitions
        self._conn = conn

    @property
    def partitions(self) -> int:
        return self._partitions

    @classmethod
    def connect(cls, url: str) -> PostgresClient:
        """Connect and check the journal's schema. Raises :class:`JournalError`."""
        where = describe(url)
        with translated(where, "connecting"):
            conn = psycopg.connect(
                url, autocommit=True, prepare_threshold=None, connect_timeout=CONNECT_TIMEOUT
            )
        try:
            with translated(where, "reading the schema"):
                partitions = read_partitions_sync(conn)
        except JournalError as exc:
            conn.close()
            raise JournalError(f"{exc}: {where}") from exc
        return cls(url, conn, partitions)

    def lookup(self, key: str) -> StoredTimer | None:
        with translated(self.where, "reading a timer"):
            return reads.lookup_sync(self._conn, key)

    def listing(self, *, state: str | None = None, limit: int = 100) -> list[StoredTimer]:
        with translated(self.where, "listing timers"):
            return reads.listing_sync(self._conn, state=state, limit=limit)

    def summary(self) -> Summary:
        with translated(self.where, "reading the summary"):
            return reads.summary_sync(self._conn)

    def schedule_many(self, requests: Sequence[ScheduleRequest]) -> list[Scheduled]:
        with translated(self.where, "scheduling"):
            return writes.schedule_many_sync(self._conn, requests)

    def cancel(self, key: str, version: int | None = None) -> CancelOutcome:
        with translated(self.where, "cancelling"):
            return writes.cancel_sync(self._conn, key, version)

    def redrive(self, key: str, *, at: float | None = None) -> StoredTimer | None:
        with translated(self.where, "redriving"):
            return writes.redrive_sync(self._conn, key, at=at)

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> PostgresClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
