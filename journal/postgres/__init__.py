"""The PostgreSQL journal: several nodes share one database, each firing the partitions it
leases. Needs the ``postgres`` extra (psycopg 3 with its pool); ``journal`` itself never imports
this package, so the SQLite journal works without it.

:class:`PostgresStore` is the engine's (async) handle; :class:`PostgresClient` the CLI's
(synchronous). See ``docs/guide/several-nodes.md`` for the design and what is wired so far.
"""

from journal.postgres.client import PostgresClient
from journal.postgres.errors import LiveKeyConflict, StoreUnavailable
from journal.postgres.firing import AttemptResult, Claimed, Outcome, SuccessorRow
from journal.postgres.leases import DEFAULT_LEASE, Lease, LeaseChange, Leases
from journal.postgres.loader import DEFAULT_HORIZON, Horizon
from journal.postgres.partitioning import partition_of
from journal.postgres.reads import Summary
from journal.postgres.rows import StoredTimer
from journal.postgres.schema import DEFAULT_PARTITIONS, SCHEMA_VERSION
from journal.postgres.store import PostgresStore, default_node, is_postgres_url
from journal.postgres.writes import CancelOutcome, Scheduled, TimerUpsert

__all__ = [
    "DEFAULT_HORIZON",
    "DEFAULT_LEASE",
    "DEFAULT_PARTITIONS",
    "SCHEMA_VERSION",
    "AttemptResult",
    "CancelOutcome",
    "Claimed",
    "Horizon",
    "Lease",
    "LeaseChange",
    "Leases",
    "LiveKeyConflict",
    "Outcome",
    "PostgresClient",
    "PostgresStore",
    "Scheduled",
    "StoreUnavailable",
    "StoredTimer",
    "SuccessorRow",
    "Summary",
    "TimerUpsert",
    "default_node",
    "is_postgres_url",
    "partition_of",
]
