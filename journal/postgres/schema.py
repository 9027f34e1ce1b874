"""The PostgreSQL journal's tables, created and upgraded by numbered migrations.

Tables (schema_version 4)::

    wheel_meta        (name PK, value): schema_version, partitions
    wheel_partitions  (partition PK, owner, epoch, lease_until, acquired_at)
    wheel_nodes       (node PK, alive_until): the nodes that renewed lately, for balancing
    wheel_timers      (key PK, partition, version, handler, due, payload, state, attempts,
                       last_error, first_attempt_at, run_epoch, cancel_requested,
                       change_seq, change_xid, updated_at, finished_at, trace)
    wheel_limits      (handler PK, rate, burst, concurrency, tokens, stamp): the cluster-wide
                       limits of handlers registered with ``limit_scope="cluster"``

Times (``due``, ``lease_until``, ``updated_at``...) are epoch seconds as ``double precision``,
the engine's own unit, so a due time goes in and comes out as the same float. Times that the
database sets are on the **database's** clock (:data:`DB_NOW`), never a node's.

``wheel_version_seq`` issues versions (strictly increasing, never reused: a sequence never goes
back, not even across a failed transaction). A trigger stamps every insert and update of a timer
with a fresh ``change_seq`` (order of changes), the writing transaction's id ``change_xid``
(the change feed's safe cursor, see :mod:`journal.postgres.feed`) and ``updated_at``, so that no
statement can forget to.

Migrations run under a transaction-scoped advisory lock, so nodes starting together upgrade
the schema once. A step is an SQL statement, or a :data:`PythonStep` run on the migrating
connection inside that transaction, for a change SQL cannot compute. A database whose schema
is newer than this code is refused, never altered.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final

from psycopg import AsyncConnection, Connection, sql

from journal.errors import JournalError
from journal.postgres.repartition import move_recurrence_rows
from journal.postgres.states import FINISHED_CODES, PENDING_CODE, RUNNING_CODE

__all__ = [
    "DB_NOW",
    "DEFAULT_PARTITIONS",
    "MAX_PARTITIONS",
    "MIGRATIONS",
    "NOTIFY_CHANNEL",
    "RECURRENCES_BY_NAME_SINCE",
    "SCHEMA_VERSION",
    "migrate",
    "read_partitions",
    "read_partitions_sync",
]

#: The database's clock, as epoch seconds. ``now()`` is the transaction's start: a check
#: ``due <= DB_NOW`` made inside a statement can only err on the late side, never early.
DB_NOW: Final = "extract(epoch FROM now())::float8"
#: Partitions of a new journal when the first node does not say: enough to spread over a
#: few dozen nodes, few enough that a node's lease renewal stays one small statement.
DEFAULT_PARTITIONS: Final = 64
#: Upper bound on partitions: every owned partition is an array element in hot statements.
MAX_PARTITIONS: Final = 4096
#: The LISTEN/NOTIFY channel: an early wake-up only; nothing depends on delivery.
NOTIFY_CHANNEL: Final = "wheel_engine"
#: Any constant key for ``pg_advisory_xact_lock`` while migrating ("WHEE" in ASCII).
_MIGRATION_LOCK: Final = 0x57484545
#: A migration step that is Python, for a change SQL cannot compute (a CRC-32): called with
#: the migrating connection, inside its transaction, and the journal's partition count.
PythonStep = Callable[[AsyncConnection[Any], int], Awaitable[None]]

_V1: Final = (
    "CREATE TABLE wheel_meta (name text PRIMARY KEY, value bigint NOT NULL)",
    "CREATE SEQUENCE wheel_version_seq AS bigint MINVALUE 1",
    "CREATE SEQUENCE wheel_change_seq AS bigint MINVALUE 1",
    "CREATE TABLE wheel_partitions ("
    " partition integer PRIMARY KEY,"
    " owner text,"
    " epoch bigint NOT NULL DEFAULT 0,"
    " lease_until double precision NOT NULL DEFAULT 0,"
    " acquired_at double precision)",
    "CREATE TABLE wheel_nodes ( node text PRIMARY KEY, alive_until double precision NOT NULL)",
    "CREATE TABLE wheel_timers ("
    " key text PRIMARY KEY,"
    " partition integer NOT NULL,"
    " version bigint NOT NULL,"
    " handler text NOT NULL,"
    " due double precision NOT NULL,"
    " payload bytea,"
    " state smallint NOT NULL,"  # journal.state.STATE_CODE
    " attempts integer NOT NULL DEFAULT 0,"
    " last_error text,"
    " first_attempt_at double precision,"
    " run_epoch bigint,"
    " cancel_requested boolean NOT NULL DEFAULT false,"
    " change_seq bigint NOT NULL DEFAULT 0,"
    " change_xid xid8 NOT NULL DEFAULT '0',"
    " updated_at double precision NOT NULL DEFAULT 0,"
    " finished_at double precision)",
    # The loader: pending timers of a partition in (due, version) order.
    "CREATE INDEX wheel_timers_pending ON wheel_timers (partition, due, version)"
    f" WHERE state = {PENDING_CODE}",
    # Failover: rows left running in a partition that changes hands.
    f"CREATE INDEX wheel_timers_running ON wheel_timers (partition) WHERE state = {RUNNING_CODE}",
    # The pruner: finished rows (SUCCEEDED, CANCELED) by finish time.
    "CREATE INDEX wheel_timers_finished ON wheel_timers (finished_at)"
    f" WHERE state IN {FINISHED_CODES}",
    # The change feed: rows written by transactions not yet known to have ended.
    "CREATE INDEX wheel_timers_changes ON wheel_timers (change_xid)",
    "CREATE FUNCTION wheel_stamp() RETURNS trigger LANGUAGE plpgsql AS $$"
    " BEGIN"
    "  NEW.change_seq := nextval('wheel_change_seq'::regclass);"
    "  NEW.change_xid := pg_current_xact_id();"
    f"  NEW.updated_at := {DB_NOW};"
    "  RETURN NEW;"
    " END $$",
    "CREATE TRIGGER wheel_timers_stamp BEFORE INSERT OR UPDATE ON wheel_timers"
    " FOR EACH ROW EXECUTE FUNCTION wheel_stamp()",
)

#: Tracing (#29): the W3C trace context a timer was scheduled (or redriven) in, NULL without
#: one. A NULL costs a bit of the row's null bitmap, no byte of data; the rows written before
#: this column existed read as untraced. Nodes already running older code keep working (their
#: statements name their columns: an insert of theirs leaves it NULL, a replace of theirs keeps
#: the replaced version's context) but one restarted is refused (a newer schema).
_V2: Final = ("ALTER TABLE wheel_timers ADD COLUMN trace text",)

#: Recurrences by name (#25): a recurrence's record and occurrences move to the partition of
#: its name (:mod:`journal.postgres.repartition`; releases the partitions rows left or
#: entered). Nodes still running older code keep working for every other key, but place a
#: recurrence's keys by the old rule: an occurrence one of them schedules lands where a node of
#: this code neither loads nor fences it together, and may wait until the nodes holding its two
#: partitions coincide. So stop them before the first node of this code starts (one restarted
#: is refused anyway: a newer schema); ``wheel-engine check`` names any row so misplaced.
_RECURRENCES_BY_NAME: Final = (move_recurrence_rows,)

#: Cluster-wide flow control (#26, :mod:`journal.postgres.limiting`): a row per handler
#: registered with ``limit_scope="cluster"``, its token bucket (``tokens`` as of ``stamp``, on
#: the database's clock) taken in the claim's own statement. The claim counts the handler's
#: running attempts (RUNNING under a live lease) by the second index, and a limited handler's
#: horizon is read on its own (the loader's cap per handler) by the first.
_CLUSTER_LIMITS: Final = (
    "CREATE TABLE wheel_limits ("
    " handler text PRIMARY KEY,"
    " rate double precision,"
    " burst integer,"
    " concurrency integer,"
    " tokens double precision NOT NULL,"
    " stamp double precision NOT NULL)",
    "CREATE INDEX wheel_timers_pending_handler ON wheel_timers (handler, due, version)"
    f" WHERE state = {PENDING_CODE}",
    "CREATE INDEX wheel_timers_running_handler ON wheel_timers (handler)"
    f" WHERE state = {RUNNING_CODE}",
)

#: A migration step: an SQL statement, or a :data:`PythonStep`.
Step = str | PythonStep
#: ``MIGRATIONS[n - 1]`` takes a database from schema_version ``n - 1`` to ``n``. Append only.
MIGRATIONS: Final[tuple[tuple[Step, ...], ...]] = (_V1, _V2, _RECURRENCES_BY_NAME, _CLUSTER_LIMITS)
SCHEMA_VERSION: Final = len(MIGRATIONS)
#: The first schema_version that places a recurrence's keys by its name.
RECURRENCES_BY_NAME_SINCE: Final = MIGRATIONS.index(_RECURRENCES_BY_NAME) + 1

_EXISTS: Final = "SELECT to_regclass('wheel_meta') IS NOT NULL"
_META: Final = "SELECT name, value FROM wheel_meta"


def _check_partitions(partitions: int) -> None:
    if type(partitions) is not int or not 1 <= partitions <= MAX_PARTITIONS:
        raise ValueError(f"partitions must be an int in 1..{MAX_PARTITIONS}, not {partitions!r}")


def _initial_rows(partitions: int) -> list[tuple[str, Any]]:
    return [
        (
            "INSERT INTO wheel_partitions (partition) SELECT generate_series(0, %s - 1)",
            (partitions,),
        ),
        (
            "INSERT INTO wheel_meta (name, value) VALUES ('schema_version', 0), ('partitions', %s)",
            (partitions,),
        ),
    ]


def _plan(meta: dict[str, int] | None, partitions: int | None) -> list[tuple[Step, Any]]:
    """The statements that bring a database with ``meta`` (None: no journal yet) up to date."""
    if meta is None:
        count = DEFAULT_PARTITIONS if partitions is None else partitions
        _check_partitions(count)
        steps: list[tuple[Step, Any]] = [(ddl, None) for ddl in MIGRATIONS[0]]
        steps += _initial_rows(count)
        steps += [(ddl, None) for migration in MIGRATIONS[1:] for ddl in migration]
        return [*steps, _set_version()]
    version = meta.get("schema_version", 0)
    if version > SCHEMA_VERSION:
        raise JournalError(
            f"the database was written by a newer wheel-engine (schema_version {version}, "
            f"this one reads up to {SCHEMA_VERSION})"
        )
    stored = meta.get("partitions")
    if partitions is not None and stored != partitions:
        raise JournalError(
            f"the journal has {stored} partitions, fixed when it was created; not {partitions}"
        )
    steps = [(ddl, None) for migration in MIGRATIONS[version:] for ddl in migration]
    return [*steps, _set_version()] if steps else []


def _set_version() -> tuple[Step, Any]:
    return ("UPDATE wheel_meta SET value = %s WHERE name = 'schema_version'", (SCHEMA_VERSION,))


def _partitions_of(meta: dict[str, int] | None) -> int:
    if meta is None or type(meta.get("partitions")) is not int:
        raise JournalError("not a wheel-engine journal: no wheel_meta table in this database")
    return meta["partitions"]


async def _read_meta(conn: AsyncConnection[Any]) -> dict[str, int] | None:
    cur = await conn.execute(_EXISTS)
    row = await cur.fetchone()
    if row is None or not row[0]:
        return None
    cur = await conn.execute(_META)
    return {str(name): int(value) for name, value in await cur.fetchall()}


async def migrate(conn: AsyncConnection[Any], partitions: int | None = None) -> int:
    """Create the journal or bring it up to :data:`SCHEMA_VERSION`; return its partition count.

    ``partitions`` is used when the journal is created; for an existing journal it must be
    None or the stored count (changing it would move keys between partitions under their
    owners' feet). Raises :class:`JournalError` for a newer schema or a different count.
    """
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        meta = await _read_meta(conn)
        for step, params in _plan(meta, partitions):
            if isinstance(step, str):
                await conn.execute(sql.SQL(step), params)
            else:  # read now: a new journal's count is inserted by an earlier step
                await step(conn, _partitions_of(await _read_meta(conn)))
        return _partitions_of(await _read_meta(conn))


async def read_partitions(conn: AsyncConnection[Any]) -> int:
    """The partition count of an existing journal, checking its schema is one this code reads."""
    meta = await _read_meta(conn)
    if meta is not None:
        _plan(meta, None)  # raises for a newer schema
    return _partitions_of(meta)


def read_partitions_sync(conn: Connection[Any]) -> int:
    """:func:`read_partitions` for the synchronous (CLI) connection. Never creates anything."""
    row = conn.execute(_EXISTS).fetchone()
    if row is None or not row[0]:
        return _partitions_of(None)
    meta = {str(name): int(value) for name, value in conn.execute(_META).fetchall()}
    _plan(meta, None)  # raises for a newer schema
    return _partitions_of(meta)
