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
from journal.postgres import inspection, reads, writes
from journal.postgres.checking import CheckReport, check_sync
from journal.postgres.errors import translated
from journal.postgres.inspection import DueEdges, NodeRow, PartitionRow
from journal.postgres.limiting import READ_LIMITS, BucketRow, bucket_rows
from journal.postgres.reads import Summary
from journal.postgres.rows import StoredTimer
from journal.postgres.schema import read_partitions_sync
from journal.postgres.target import Target
from journal.postgres.writes import CancelOutcome, Requests, Scheduled, TimerUpsert
from journal.state import TimerState

__all__ = ["PostgresClient"]

#: Seconds to wait for the server before the CLI gives up with one line.
CONNECT_TIMEOUT = 10
_HAS_LIMITS = "SELECT to_regclass('wheel_limits') IS NOT NULL"


class PostgresClient(Requests):
    """An open client. Create with :meth:`connect`; close with :meth:`close`."""

    def __init__(self, target: Target, conn: psycopg.Connection[Any], partitions: int) -> None:
        self.url = target.url  #: without its password (see ``journal.postgres.target``)
        self.where = target.where
        self._partitions = partitions
        self._conn = conn

    @property
    def partitions(self) -> int:
        return self._partitions

    @classmethod
    def connect(cls, url: str) -> PostgresClient:
        """Connect and check the journal's schema. Raises :class:`JournalError`."""
        target = Target(url)
        where = target.where
        with translated(where, "connecting", target.scrub):
            conn = psycopg.connect(
                target.url,
                autocommit=True,
                prepare_threshold=None,
                connect_timeout=CONNECT_TIMEOUT,
                **target.kwargs(),
            )
        try:
            with translated(where, "reading the schema", target.scrub):
                partitions = read_partitions_sync(conn)
        except JournalError as exc:
            conn.close()
            raise JournalError(f"{exc}: {where}") from exc
        return cls(target, conn, partitions)

    def lookup(self, key: str) -> StoredTimer | None:
        with translated(self.where, "reading a timer"):
            return reads.lookup_sync(self._conn, key)

    def listing(
        self, *, state: str | None = None, handler: str | None = None, limit: int | None = 100
    ) -> list[StoredTimer]:
        """Up to ``limit`` (None: all) timers in (due, version) order."""
        with translated(self.where, "listing timers"):
            return inspection.listing_sync(self._conn, state=state, handler=handler, limit=limit)

    def count(self, *, state: str | None = None, handler: str | None = None) -> int:
        with translated(self.where, "counting timers"):
            return inspection.count_sync(self._conn, state=state, handler=handler)

    def handler_counts(self) -> dict[str, dict[TimerState, int]]:
        with translated(self.where, "counting timers by handler"):
            return inspection.handler_counts_sync(self._conn)

    def due_edges(self) -> DueEdges:
        with translated(self.where, "reading due times"):
            return inspection.due_edges_sync(self._conn)

    def partition_table(self) -> list[PartitionRow]:
        with translated(self.where, "reading the partitions"):
            return inspection.partitions_sync(self._conn)

    def nodes(self) -> list[NodeRow]:
        with translated(self.where, "reading the nodes"):
            return inspection.nodes_sync(self._conn)

    def limits(self) -> list[BucketRow]:
        """The cluster-wide limits (``limit_scope="cluster"``), by handler: none on a journal
        from before them."""
        with translated(self.where, "reading the limits"):
            if self._conn.execute(_HAS_LIMITS).fetchone() != (True,):
                return []
            return bucket_rows(self._conn.execute(READ_LIMITS).fetchall())

    def last_version(self) -> int:
        with translated(self.where, "reading the version sequence"):
            return inspection.last_version_sync(self._conn)

    def schema_version(self) -> int:
        with translated(self.where, "reading the schema version"):
            return inspection.schema_version_sync(self._conn)

    def db_now(self) -> float:
        """The database's clock: the one that decides whether a timer is due."""
        with translated(self.where, "reading the clock"):
            return inspection.db_now_sync(self._conn)

    def check(self) -> CheckReport:
        """See :mod:`journal.postgres.checking`; read-only."""
        with translated(self.where, "checking"):
            return check_sync(self._conn, self._partitions)

    def summary(self) -> Summary:
        with translated(self.where, "reading the summary"):
            return reads.summary_sync(self._conn)

    def schedule_many(self, requests: Sequence[TimerUpsert]) -> list[Scheduled]:
        with translated(self.where, "scheduling"):
            return writes.schedule_many_sync(self._conn, requests)

    def cancel(self, key: str, version: int | None = None) -> CancelOutcome:
        with translated(self.where, "cancelling"):
            return writes.cancel_sync(self._conn, key, version)

    def redrive(
        self, key: str, *, at: float | None = None, version: int | None = None
    ) -> StoredTimer | None:
        with translated(self.where, "redriving"):
            return writes.redrive_sync(self._conn, key, at=at, version=version)

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> PostgresClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
