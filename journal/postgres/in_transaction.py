"""Writing timers in the caller's own transaction (the transactional outbox).

:class:`InTransaction` runs the statements of :mod:`journal.postgres.writes` (the same SQL, the
same checks, the same results) on a connection the application holds, inside whatever
transaction it has open, so the timer commits or rolls back with the application's own rows:

- **The connection is checked first**, before anything is written (:class:`UnusableConnection`,
  a ``ValueError``): it must be an open psycopg 3 ``AsyncConnection`` that is not in a failed
  transaction, has no statement running, and is either inside a transaction or not in
  autocommit (then the first statement opens the transaction the caller will commit; with
  autocommit and no ``conn.transaction()`` block each statement would commit on its own). It
  must reach the journal's database: the same cluster (``pg_control_system()``'s system
  identifier, which a copy of the data directory keeps but a restore into another cluster does
  not) and the same database in it (its oid, which a renamed or template-copied database does
  not share). The check runs once per connection object (a psycopg connection never moves to
  another server).
- **The journal's schema** is whatever schema its tables were created in (the first of the
  engine's ``search_path``). For the duration of the call, ``search_path`` is set (with
  ``set_config(..., true)``, local to the transaction) to that schema and ``pg_temp``, then set
  back to what the caller had: the statements, and the trigger that stamps each row for the
  change feed, find the journal's tables whatever the caller's own path says.
- **A savepoint** surrounds the statements: if one of them fails (a duplicate key under
  ``on_conflict="error"``, a serialization failure), it is rolled back alone and the caller's
  transaction stays usable, as it was before the call.

What the caller's commit does: the rows become visible, the ``NOTIFY`` the statements sent is
delivered (waking the owners), and the owners' change feed delivers the rows however long the
transaction stayed open (:mod:`journal.postgres.feed`). A rollback leaves nothing; a version
drawn from ``wheel_version_seq`` inside it is skipped (versions only grow). Driver errors are
not translated here: they belong to the caller's transaction, and its retry logic (a
serialization failure under ``SERIALIZABLE``, say) must see them as psycopg raised them.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, Final, NamedTuple

from psycopg import AsyncConnection
from psycopg.pq import TransactionStatus

from journal.errors import UnusableConnection
from journal.postgres import writes
from journal.postgres.writes import CancelOutcome, Scheduled, TimerUpsert

__all__ = ["Identity", "InTransaction", "UnusableConnection", "check_usable", "read_identity"]

#: The cluster and the database a connection reaches.
_WHERE: Final = (
    "(SELECT system_identifier FROM pg_control_system())::text,"
    " (SELECT oid FROM pg_database WHERE datname = current_database())::bigint"
)
#: The journal's identity, read on one of the engine's own connections.
_IDENTITY: Final = (
    f"SELECT {_WHERE}, n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
    " WHERE c.oid = to_regclass('wheel_timers')"
)
#: The caller's search_path, read (in a materialized CTE: before it is changed) and replaced.
_ENTER: Final = (
    "WITH old AS MATERIALIZED (SELECT current_setting('search_path') AS path)"
    " SELECT old.path, set_config('search_path', %s, true){where} FROM old"
)
_ENTER_CHECKED: Final = _ENTER.format(where="")
_ENTER_CHECKING: Final = _ENTER.format(where=f", {_WHERE}")
_LEAVE: Final = "SELECT set_config('search_path', %s, true)"


class Identity(NamedTuple):
    """Which journal this is: the cluster, the database in it, and the tables' schema."""

    system: str  #: ``pg_control_system().system_identifier``, as text
    database: int  #: the database's oid
    schema: str  #: the schema holding ``wheel_timers``

    @property
    def search_path(self) -> str:
        """A ``search_path`` that finds the journal's tables first and temporary ones last."""
        return f'"{self.schema.replace(chr(34), chr(34) * 2)}", pg_temp'


async def read_identity(conn: AsyncConnection[Any]) -> Identity:
    """The journal's :class:`Identity`, on a connection whose path finds its tables."""
    row = await (await conn.execute(_IDENTITY)).fetchone()
    if row is None:
        raise UnusableConnection("not a wheel-engine journal: no wheel_timers table")
    return Identity(str(row[0]), int(row[1]), str(row[2]))


def check_usable(conn: object) -> AsyncConnection[Any]:
    """``conn`` if it can take the journal's statements in its transaction; else raises
    :class:`UnusableConnection` (``TypeError`` for what is no psycopg ``AsyncConnection``)."""
    if not isinstance(conn, AsyncConnection):
        raise TypeError(
            "connection must be a psycopg 3 AsyncConnection (with SQLAlchemy:"
            f" (await conn.get_raw_connection()).driver_connection), not {type(conn).__name__}"
        )
    if conn.closed:
        raise UnusableConnection("the connection is closed")
    status = conn.info.transaction_status
    if status is TransactionStatus.INERROR:
        raise UnusableConnection(
            "the connection's transaction has failed: roll it back (or to a savepoint) first"
        )
    if status is TransactionStatus.ACTIVE:
        raise UnusableConnection("a statement is still running on the connection")
    if status is TransactionStatus.IDLE and conn.autocommit:
        raise UnusableConnection(
            "the connection is in autocommit with no transaction open: the timer would commit"
            " on its own; write inside 'async with conn.transaction():' or turn autocommit off"
        )
    if status is not TransactionStatus.IDLE and status is not TransactionStatus.INTRANS:
        raise UnusableConnection(f"the connection is not usable ({status.name})")
    return conn


class InTransaction:
    """The writes of one journal in callers' transactions (see the module docstring).

    ``identity`` reads the journal's :class:`Identity` (the store's, cached there)."""

    __slots__ = ("_checked", "_identity")

    def __init__(self, identity: Callable[[], Awaitable[Identity]]) -> None:
        self._identity = identity
        #: Connections found to reach the journal's database (forgotten as they are freed).
        self._checked: weakref.WeakSet[AsyncConnection[Any]] = weakref.WeakSet()

    async def schedule_many(self, conn: object, requests: Sequence[TimerUpsert]) -> list[Scheduled]:
        """:func:`journal.postgres.writes.schedule_many` in ``conn``'s transaction."""
        async with self._joined(conn) as joined:
            return await writes.write_rounds(joined, requests)

    async def cancel(self, conn: object, key: str, version: int | None = None) -> CancelOutcome:
        """:func:`journal.postgres.writes.cancel` in ``conn``'s transaction: the outcome its
        commit makes true (until then the row stays locked, so no node can claim it)."""
        async with self._joined(conn) as joined:
            return await writes.cancel(joined, key, version)

    @contextlib.asynccontextmanager
    async def _joined(self, given: object) -> AsyncIterator[AsyncConnection[Any]]:
        conn = check_usable(given)
        identity = await self._identity()
        checking = conn not in self._checked
        # This first statement opens the caller's transaction if none was (autocommit off), so
        # the savepoint below is a savepoint and never a transaction of our own.
        cur = await conn.execute(
            _ENTER_CHECKING if checking else _ENTER_CHECKED, (identity.search_path,)
        )
        row = await cur.fetchone()
        assert row is not None  # a SELECT from a one-row CTE returns one row
        try:
            if checking:
                _check_same(identity, str(row[2]), int(row[3]))
                self._checked.add(conn)
            async with conn.transaction():
                yield conn
        finally:
            if conn.info.transaction_status is TransactionStatus.INTRANS:
                await conn.execute(_LEAVE, (row[0],))


def _check_same(identity: Identity, system: str, database: int) -> None:
    if system != identity.system:
        raise UnusableConnection(
            "the connection reaches another PostgreSQL cluster than the journal's"
        )
    if database != identity.database:
        raise UnusableConnection("the connection reaches another database than the journal's")
