"""``PostgresStore``: one node's handle on a PostgreSQL journal shared by several nodes.

It composes the concepts of this package over one ``AsyncConnectionPool`` (autocommit,
prepared statements off so it works behind PgBouncer in transaction mode) and one separate
LISTEN connection:

- :mod:`~journal.postgres.schema` (created or upgraded at :meth:`PostgresStore.open`),
- :mod:`~journal.postgres.leases` (:meth:`maintain`, :meth:`release`),
- :mod:`~journal.postgres.writes` (:meth:`schedule_many`, :meth:`cancel`, :meth:`redrive`),
  and the same in a caller's transaction (:attr:`in_transaction`, :mod:`.in_transaction`),
- :mod:`~journal.postgres.firing` (:meth:`attempt`, :meth:`finish`, :meth:`give_up`),
- :mod:`~journal.postgres.loader` (:meth:`refill`, :meth:`catch_up`),
- :mod:`~journal.postgres.feed` (:meth:`changes`, :meth:`wait`),
- :mod:`~journal.postgres.pruning` (:meth:`prune`), :mod:`~journal.postgres.reads`
  (:meth:`lookup`, :meth:`records`, :meth:`summary`: :class:`~journal.postgres.reads.Reading`).

It holds no timers: the engine keeps its wheel and calls these. Every driver error comes out as
:class:`~journal.postgres.errors.StoreUnavailable` (a ``JournalError``). Not thread-safe: use
it from the event loop that opened it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import os
import socket
from collections.abc import Callable, Sequence
from typing import Any, Final

import psycopg
from psycopg_pool import AsyncConnectionPool

from journal.errors import JournalError
from journal.postgres import firing, limiting, pruning, writes
from journal.postgres.errors import translated
from journal.postgres.feed import ChangeFeed, Listener
from journal.postgres.firing import AttemptResult, Outcome, SuccessorRow
from journal.postgres.in_transaction import Identity, InTransaction, read_identity
from journal.postgres.leases import DEFAULT_LEASE, LeaseChange, Leases
from journal.postgres.limiting import ClusterLimits, LimitedClaim
from journal.postgres.loader import DEFAULT_HORIZON, Horizon
from journal.postgres.pooling import CONNECTION_KWARGS, checkout, new_pool
from journal.postgres.reads import Reading
from journal.postgres.rows import StoredTimer
from journal.postgres.schema import migrate
from journal.postgres.target import Target
from journal.postgres.writes import CancelOutcome, Requests, Scheduled, TimerUpsert
from journal.urls import is_postgres_url

__all__ = ["PostgresStore", "default_node", "is_postgres_url"]

logger = logging.getLogger(__name__)

#: Connections in the pool: the engine's writes, attempts and outcomes run concurrently.
DEFAULT_POOL_SIZE: Final = 4
#: Seconds to wait for the first connection at open, and for a free one later, unless the
#: caller says otherwise (``Engine(connect_timeout=...)``).
CONNECT_TIMEOUT: Final = 10.0
#: Seconds a replaced pool waits for its connections in use before it closes them.
_OLD_POOL_WAIT: Final = 5.0


def default_node() -> str:
    """The node name when none is given: host name and process id (unique per process)."""
    return f"{socket.gethostname()}-{os.getpid()}"


class PostgresStore(Requests, Reading):
    """An open store. Create with :meth:`open`; close with :meth:`close`."""

    def __init__(
        self, target: Target, pool: AsyncConnectionPool, leases: Leases, horizon: Horizon
    ) -> None:
        self.url = target.url  #: without its password (see ``journal.postgres.target``)
        self.where = target.where
        self.leases = leases
        self.horizon = horizon
        self.feed = ChangeFeed()
        self.listener = Listener(target)
        self._target = target
        self._pool = pool
        self._closed = False
        #: Makes a pool like the first (set by :meth:`open`), and the renewal under way.
        self._renewing: Callable[[], AsyncConnectionPool] | None = None
        self._renewal: asyncio.Task[None] | None = None
        self._identity: Identity | None = None
        #: The writes in callers' own transactions (``connection=``), checked against this one.
        self.in_transaction = InTransaction(self.identity)

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        node: str | None = None,
        lease: float = DEFAULT_LEASE,
        horizon: float = DEFAULT_HORIZON,
        partitions: int | None = None,
        pool_size: int = DEFAULT_POOL_SIZE,
        listen: bool = True,
        connect_timeout: float = CONNECT_TIMEOUT,
    ) -> PostgresStore:
        """Connect, create or upgrade the schema, and start listening. Takes no partition yet:
        call :meth:`maintain`. ``partitions`` applies only when the journal is created.
        ``connect_timeout``: seconds to wait for a connection, at open and for a free one of
        the pool later (a statement waiting longer fails with ``StoreUnavailable``)."""
        target = Target(url)
        where, scrub = target.where, target.scrub
        # Bad arguments raise before anything is created (the count is the journal's own).
        leases = Leases(default_node() if node is None else node, 1, lease)
        loaded = Horizon(horizon)
        kwargs = {**CONNECTION_KWARGS, **target.kwargs()}
        # One plain connection first: a wrong URL or a missing database fails at once with
        # the server's own words, where the pool would retry until its timeout.
        with translated(where, "connecting", scrub):
            first = await psycopg.AsyncConnection.connect(
                target.url, connect_timeout=max(1, math.ceil(connect_timeout)), **kwargs
            )
        async with first:
            with translated(where, "creating or checking the schema", scrub):
                leases.partitions = await migrate(first, partitions)
        pool = new_pool(target, leases.node, pool_size, connect_timeout)
        try:
            with translated(where, "connecting", scrub):
                await pool.open(wait=True, timeout=connect_timeout)
        except BaseException:
            await pool.close()
            raise
        store = cls(target, pool, leases, loaded)
        store._renewing = functools.partial(
            new_pool, target, leases.node, pool_size, connect_timeout
        )
        if listen:
            store.listener.reconnected = store._renew_pool
            store.listener.start()
        logger.info(
            "PostgreSQL journal open as node %s, %d partitions: %s",
            leases.node,
            leases.partitions,
            where,
        )
        return store

    # -- keys and partitions --------------------------------------------------------------------

    @property
    def node(self) -> str:
        return self.leases.node

    @property
    def partitions(self) -> int:
        return self.leases.partitions

    def held(self) -> list[int]:
        """Partitions this node may fire in now (lease held and not near its end)."""
        return sorted(p for p in self.leases.owned if self.leases.usable(p))

    # -- leases --------------------------------------------------------------------------------

    async def maintain(self) -> LeaseChange:
        """One lease round: heartbeat, renew, take up to the fair share (see ``leases``)."""
        async with self._connection("renewing leases") as conn:
            return await self.leases.maintain(conn)

    async def release(self, partitions: Sequence[int] | None = None) -> list[int]:
        """Give up ``partitions`` (default: all); call once their handlers have ended. They
        leave :attr:`leases` at once (before waiting for a connection): nothing more starts
        there. If the statement fails, their leases simply lapse."""
        params = self.leases.detach(partitions)
        async with self._connection("releasing partitions") as conn:
            return await self.leases.release_detached(conn, params)

    # -- writes --------------------------------------------------------------------------------

    async def schedule_many(self, requests: Sequence[TimerUpsert]) -> list[Scheduled]:
        """Insert or replace timers, all in one transaction (see ``writes``)."""
        async with self._connection("scheduling") as conn:
            return await writes.schedule_many(conn, requests)

    async def cancel(self, key: str, version: int | None = None) -> CancelOutcome:
        async with self._connection("cancelling") as conn:
            return await writes.cancel(conn, key, version)

    async def redrive(
        self, key: str, *, at: float | None = None, trace: str | None = None
    ) -> StoredTimer | None:
        async with self._connection("redriving") as conn:
            return await writes.redrive(conn, key, at=at, trace=trace)

    # -- firing --------------------------------------------------------------------------------

    def _fenced(self, key: str, version: int) -> tuple[str, int, int, int] | None:
        partition = self.partition_of(key)
        epoch = self.leases.epoch_of(partition)
        return None if epoch is None else (key, version, partition, epoch)

    async def attempt(self, timers: Sequence[tuple[str, int]]) -> AttemptResult:
        """Claim ``(key, version)`` pairs in one compare-and-set (see ``firing``). Those of
        partitions this node cannot use now are not sent: they are lost to it."""
        return await self.claim([r for r in (self._fenced(k, v) for k, v in timers) if r])

    async def claim(
        self,
        requests: Sequence[tuple[str, int, int, int]],
        successors: Sequence[SuccessorRow] = (),
    ) -> AttemptResult:
        """:meth:`attempt` of ``(key, version, partition, epoch)`` fenced by the caller (at the
        instant it decided to fire them: see ``wheel_engine.nodes.sink``), with the claimed
        ones' ``successors`` inserted if absent in its transaction (``firing.attempt``)."""
        async with self._connection("committing attempts") as conn:
            return await firing.attempt(conn, self.node, requests, successors)

    async def claim_limited(
        self,
        handler: str,
        limits: ClusterLimits,
        requests: Sequence[tuple[str, int, int, int]],
        *,
        write: bool,
    ) -> LimitedClaim:
        """:meth:`claim` of a ``limit_scope="cluster"`` handler's requests: within the limits
        of its row, taken in the claim's own statement (see ``limiting``)."""
        async with self._connection("committing attempts") as conn:
            return await limiting.claim(conn, self.node, handler, limits, requests, write=write)

    async def register_limits(self, limits: dict[str, ClusterLimits]) -> None:
        """Write this node's cluster-wide limits, by handler (see ``limiting``)."""
        async with self._connection("registering limits") as conn:
            await limiting.register(conn, limits)

    async def unclaim_at(self, claims: Sequence[tuple[str, int, int]]) -> set[str]:
        """:meth:`unclaim` of ``(key, version, epoch)`` claimed under that epoch (whatever this
        node holds now: a claim whose lease lapsed is given back too, unless taken over)."""
        async with self._connection("giving back attempts") as conn:
            return await firing.unclaim(conn, claims)

    async def running_at(self, held: Sequence[tuple[int, int]]) -> list[tuple[str, int, int]]:
        """``(key, version, attempts)`` RUNNING under these ``(partition, epoch)`` pairs."""
        async with self._connection("reading running timers") as conn:
            return await firing.running_at(conn, held)

    async def requeue(self, claims: Sequence[tuple[str, int, int, int]]) -> list[StoredTimer]:
        """RUNNING rows without a handler back to PENDING (see ``firing.requeue``)."""
        async with self._connection("requeueing timers") as conn:
            return await firing.requeue(conn, claims)

    async def finish(self, outcomes: Sequence[Outcome]) -> set[str]:
        """Record outcomes, fenced; returns the keys accepted (see ``firing``)."""
        async with self._connection("committing outcomes") as conn:
            return await firing.finish(conn, outcomes)

    async def unclaim(self, timers: Sequence[tuple[str, int]]) -> set[str]:
        """``(key, version)`` claimed by this node whose handlers never started: PENDING again,
        uncharged (see ``firing.unclaim``). Safe after a failed :meth:`attempt`."""
        return await self.unclaim_at(
            [(k, v, f[3]) for k, v in timers if (f := self._fenced(k, v)) is not None]
        )

    async def give_up(self, timers: Sequence[tuple[str, int, str]]) -> set[str]:
        """``(key, version, error)``: PENDING to DEAD without an attempt (see ``firing``)."""
        requests = []
        for key, version, error in timers:
            fenced = self._fenced(key, version)
            if fenced is not None:
                requests.append((*fenced, error))
        async with self._connection("giving up timers") as conn:
            return await firing.give_up(conn, self.node, requests)

    # -- loading and the feed -------------------------------------------------------------------

    async def start_feed(self) -> None:
        """Place the feed's cursor at now. Call once, before the first :meth:`refill`."""
        async with self._connection("reading the change feed") as conn:
            await self.feed.start(conn)

    async def refill(self) -> list[StoredTimer]:
        """Pending timers of the held partitions, on from what was loaded (see ``loader``)."""
        async with self._connection("loading timers") as conn:
            return await self.horizon.refill(conn, self.held())

    async def refill_capped(self) -> list[StoredTimer]:
        """The capped handlers' pending timers, on from their own cursors (see ``loader``)."""
        async with self._connection("loading timers") as conn:
            return await self.horizon.refill_capped(conn, self.held())

    async def catch_up(self, partitions: Sequence[int]) -> list[StoredTimer]:
        """A newly gained partition's pending timers up to what was loaded elsewhere."""
        async with self._connection("loading timers") as conn:
            return await self.horizon.catch_up(conn, partitions)

    async def changes(self) -> list[StoredTimer]:
        """Rows of the held partitions changed since the last call (see ``feed``)."""
        async with self._connection("reading the change feed") as conn:
            return await self.feed.read(conn, self.held())

    async def wait(self, timeout: float) -> bool:
        """Sleep up to ``timeout`` s, less when a NOTIFY comes; True if one came."""
        return await self.listener.wait(timeout)

    # -- upkeep and reading ---------------------------------------------------------------------

    async def prune(
        self,
        retention: float,
        limit: int = pruning.DEFAULT_LIMIT,
        *,
        max_retained: int | None = None,
    ) -> int:
        """Delete finished rows of the held partitions older than ``retention`` seconds, and
        (``max_retained`` not None) beyond the journal's newest ``max_retained`` finished rows."""
        held = [(p, self.leases.owned[p].epoch) for p in self.held()]
        async with self._connection("pruning") as conn:
            return await pruning.prune(
                conn, self.node, held, retention=retention, max_retained=max_retained, limit=limit
            )

    async def identity(self) -> Identity:
        """The journal's cluster, database and schema (read once): see ``in_transaction``."""
        if self._identity is None:
            async with self._connection("reading the journal's identity") as conn:
                self._identity = await read_identity(conn)
        return self._identity

    def _connection(self, doing: str) -> contextlib.AbstractAsyncContextManager[Any]:
        if self._closed:
            raise JournalError(f"PostgreSQL journal is closed: {self.where}")
        return checkout(self._pool, self._target, doing)

    # -- after an outage --------------------------------------------------------------------

    def _renew_pool(self) -> None:
        """The server is back after an outage (the LISTEN connection reconnected): open a new
        pool at once rather than wait for the old one's reconnection backoff (psycopg_pool
        tries again after 1, 2, 4, 8... seconds, so it can stay empty as long again as the
        outage lasted). Calls waiting on the old pool fail and are retried; its connections in
        use are closed when they are returned."""
        if self._closed or self._renewing is None or self._renewal is not None:
            return
        old, self._pool = self._pool, self._renewing()
        logger.info("node %s: the database is back, connecting afresh", self.node)
        self._renewal = asyncio.get_running_loop().create_task(self._swap(old, self._pool))

    async def _swap(self, old: AsyncConnectionPool, new: AsyncConnectionPool) -> None:
        try:
            await new.open(wait=False)
            await old.close(timeout=_OLD_POOL_WAIT)
        except Exception:  # never raised to anyone: the next statement says what is wrong
            logger.warning("renewing the connection pool failed", exc_info=True)
        finally:
            self._renewal = None

    # -- closing -------------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    async def close(self) -> None:
        """Release every partition (others take them at once), leave, disconnect. Idempotent;
        if the database is unreachable the leases simply lapse."""
        if self._closed:
            return
        try:
            async with self._connection("releasing partitions") as conn:
                await self.leases.leave(conn)
        except JournalError:
            logger.warning("could not release partitions; they lapse on their own", exc_info=True)
        finally:
            self._closed = True
            await self.listener.close()
            if self._renewal is not None:
                await asyncio.gather(self._renewal, return_exceptions=True)
            await self._pool.close()

    async def __aenter__(self) -> PostgresStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<PostgresStore {self.where} node={self.node!r} {state}>"
