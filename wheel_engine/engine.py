"""The engine's public API: registration, lifecycle, schedule, cancel, reading, redrive.

:class:`Engine` is composed of parts, one module each: the timer table (:mod:`.timers`), the clock
callback (:mod:`.trigger`), the one runner of due timers (:mod:`.dispatcher`: the queue, the
slots, the workers), an attempt's end (:mod:`.outcomes`), the public calls' changes
(:mod:`.scheduling`), the storage (:mod:`.backends`, :mod:`.commits`), the request checks
(:mod:`.validation`). ``docs/design.md`` shows how a timer moves.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Coroutine, Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, TypeVar, Unpack, cast

from wheel_engine import signals, tracing
from wheel_engine.backends import Backend, backend_for
from wheel_engine.clock import Clock, SystemClock, wait_at_most
from wheel_engine.commits import Commits
from wheel_engine.diagnostics import DEFAULT_MAX_ERROR_BYTES, ErrorDescriber
from wheel_engine.dispatcher import Dispatcher
from wheel_engine.engine_stats import engine_stats
from wheel_engine.errors import EngineError
from wheel_engine.events import EventBus, Subscriber
from wheel_engine.front import Front
from wheel_engine.front import schedule as front_schedule
from wheel_engine.handlers import HandlerFn, HandlerOptions, HandlerSpec, make_spec
from wheel_engine.limit_options import LimitOptions, check_scope
from wheel_engine.local_storage import LocalStorage
from wheel_engine.model import CancelResult, TimerInfo, TimerState
from wheel_engine.nodes.options import check_node_options, node_for
from wheel_engine.nodes.transactional import Joined
from wheel_engine.recurring.api import RecurringCalls
from wheel_engine.recurring.records import check_user_handler_name
from wheel_engine.retry import RetryPolicy
from wheel_engine.scheduling import Scheduler
from wheel_engine.stats import Counters
from wheel_engine.storage import Storage
from wheel_engine.timers import TimerTable
from wheel_engine.trigger import Trigger
from wheel_engine.validation import (
    RequestChecker,
    check_engine_options,
    check_key,
    check_version,
    due_time,
)

if TYPE_CHECKING:
    from journal import Journal
    from wheel_engine.admin import AdminServer

logger = logging.getLogger(__name__)

F = TypeVar("F", bound=HandlerFn)


class Engine(RecurringCalls):
    """Durable timers on the running asyncio loop. See ``docs/contract.md`` for the contract.

    Guarantees: a handler never runs before its timer's due time by the wall clock; every
    committed, uncancelled timer fires at least once (until a handler returns or it is DEAD);
    a cancel that returned ``CANCELED`` is final; with a journal all of that survives crashes.
    Not guaranteed: exactly once (handlers get ``Firing.idempotency_key`` for that).

    Finished timers (SUCCEEDED, CANCELED) stay readable for ``retention`` seconds, at most
    ``max_retained`` of them (the oldest forgotten first); DEAD ones stay until redriven. Bad
    input raises before anything changes, in memory or in the journal.

    ``admin=True`` serves the CLI's writing commands on ``<journal>-admin.sock`` while the
    engine runs (:mod:`wheel_engine.admin`); it needs a journal path.

    A ``postgresql://`` URL shares the journal with other engines (``docs/guide/several-nodes.md``):
    ``node`` names this one (default: host name and pid); ``lease``, ``horizon`` in seconds;
    ``connect_timeout``: seconds to wait for a database connection (default 10).
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = "wheel-engine.db",
        *,
        tick: float = 0.001,
        durability: Literal["full", "normal"] = "full",
        max_concurrency: int = 64,
        default_retry: RetryPolicy | None = None,
        default_timeout: float | None = None,
        max_payload_bytes: int = 65536,
        clock: Clock | None = None,
        retention: float = 3600.0,
        max_retained: int = 100_000,
        compact_min_records: int = 10_000,
        clock_check: float | None = 60.0,
        max_error_bytes: int = DEFAULT_MAX_ERROR_BYTES,
        admin: bool = False,
        node: str | None = None,
        lease: float | None = None,
        horizon: float | None = None,
        connect_timeout: float | None = None,
    ) -> None:
        check_node_options(path, node, lease, horizon, admin, connect_timeout=connect_timeout)
        check_engine_options(
            tick, durability, max_concurrency, retention, max_retained, max_error_bytes, admin, path
        )
        self.path = None if path is None else os.fspath(path)
        self.tick = float(tick)
        self.durability = durability
        self.max_concurrency = max_concurrency
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.retention = float(retention)
        self.max_retained = max_retained
        self.clock_check = clock_check
        self.max_error_bytes = max_error_bytes
        self.default_retry = default_retry if default_retry is not None else RetryPolicy()
        self.default_timeout = default_timeout
        self.max_payload_bytes = max_payload_bytes
        self.compact_min_records = compact_min_records
        self.admin = admin
        self._handlers: dict[str, HandlerSpec] = {}
        self._stats = Counters()
        self._events = events = EventBus()  # on_event's subscribers; the parts emit
        self._table = TimerTable(
            self._handlers, tick=self.tick, retention=self.retention, max_retained=max_retained
        )
        self._node = on_node = node_for(
            path, node, lease, horizon, (self.retention, max_retained), connect_timeout
        )
        self._check = RequestChecker(self._handlers, self._table.timers, max_payload_bytes)
        self._commits = Commits(self._table, self.clock, compact_min_records=compact_min_records)
        self._trigger = Trigger(self._table, self.clock, clock_check)
        self._dispatcher = Dispatcher(
            self._table,
            self._commits,
            self._stats,
            self.clock,
            events,
            arm=self._trigger.arm,
            max_concurrency=max_concurrency,
            max_error_bytes=max_error_bytes,
        )
        self._pool = self._dispatcher.pool
        self._scheduler = Scheduler(
            self._table, self._commits, self._stats, self.clock, self._trigger, self._pool, events
        )
        local = LocalStorage(self._scheduler, self._commits, self._table, self._check)
        parts = (self._table, self._trigger, self._dispatcher, self._commits, self._stats)
        self._backend: Backend = backend_for(
            self.path, durability, on_node, local, (*parts, self._check, events)
        )
        self._storage: Storage = local  # the backend's own, once open
        durable = self.path is not None
        self._front = Front(self.clock, self._check, self._scheduler, local, durable=durable)
        self._joined = Joined(on_node, self._front)  # connection=: the caller's transaction
        self._started = False
        self._close_begun = False
        self._closed = asyncio.Event()  # set once close() has finished
        self._admin: AdminServer | None = None  # with admin=True, once started
        self._background: set[asyncio.Future[Any]] = set()
        self._series = self._install_series()  # recurring timers: wheel_engine/recurring/

    @property
    def journal(self) -> Journal | None:
        """The open SQLite journal (None in memory, on PostgreSQL, or before :meth:`start`)."""
        return self._backend.journal()

    def handler(self, name: str, **options: Unpack[HandlerOptions]) -> Callable[[F], F]:
        """Decorator form of :meth:`register`, with the same options."""

        def decorate(fn: F) -> F:
            self.register(name, fn, **options)
            return fn

        return decorate

    def register(
        self,
        name: str,
        fn: HandlerFn,
        *,
        timeout: float | None = None,
        retry: RetryPolicy | None = None,
        thread: bool = False,
        describe_error: ErrorDescriber | None = None,
        **limits: Unpack[LimitOptions],
    ) -> None:
        """Register ``fn`` under ``name``. Timers parked for want of it become due again.

        ``describe_error(exc) -> str`` decides what is kept of an exception the handler raised
        (``last_error``, the journal, the DEAD log line); see :mod:`wheel_engine.diagnostics`.
        ``concurrency``, ``rate``, ``burst``, ``limit_scope``: flow control, see
        :mod:`wheel_engine.limits` (a timer waiting for a slot or token stays PENDING, uncharged).
        """
        check_user_handler_name(name)  # before anything changes
        spec = make_spec(
            name,
            fn,
            timeout=timeout if timeout is not None else self.default_timeout,
            retry=retry if retry is not None else self.default_retry,
            thread=thread,
            describe_error=describe_error,
            **limits,
        )
        check_scope(name, spec.limits, shared=self._backend.shared)  # "cluster": PostgreSQL
        self._handlers[name] = spec
        self._dispatcher.limits.configure(name, spec.limits)  # flow control (issue 26)
        # Recovery parks timers whose handler is not registered; they become due now.
        if self._table.unpark(name) | self._series.registered(spec):  # and its occurrences
            self._trigger.arm()

    async def start(self) -> None:
        """Open and recover the journal, then start firing. Overdue timers fire at once.

        With ``admin=True`` the admin socket is served once the engine runs; if it cannot be
        (another engine serves it, say), the engine is closed again and the error raised.
        """
        if self._started:
            raise EngineError("engine already started")
        loop = asyncio.get_running_loop()
        self._table.start_wheel(self.clock.time())
        self._storage = await self._backend.open(self.clock)
        self._started = True
        self._front.open(self._storage, local=not self._backend.shared)
        tracing.start(self)  # tracing (#29): nothing changes unless OpenTelemetry is on
        self.clock.attach(self)
        self._dispatcher.start(loop)
        self._trigger.start(loop, self._dispatcher.enqueue)
        await self._series.open()
        if self.admin:
            from wheel_engine.admin import AdminServer, admin_path

            self._admin = AdminServer(self, admin_path(cast(str, self.path)))  # checked: a path
            try:
                await self._admin.start()
            except BaseException:
                await self.close()
                raise

    async def close(self, grace: float = 10.0) -> None:
        """Stop dispatching, wait up to ``grace`` seconds for running handlers, then cancel them.

        Cancelled handlers are not acknowledged: they fire again after the next start. The
        admin socket (if any) is closed first, while the engine still takes commands. The
        journal is flushed (acks included) and closed. Idempotent.
        """
        if not self._started or self._close_begun:
            if self._close_begun:
                await self._closed.wait()
            return
        self._close_begun = True
        try:
            if self._admin is not None:
                await self._admin.close(grace)  # commands under way finish, within grace
            self._stop()
            # Only handlers already running get the grace period; see drop_unstarted.
            self._dispatcher.drop_unstarted()
            if self._dispatcher.running and grace > 0:  # until none runs, or grace has passed
                await wait_at_most(self.clock, self._dispatcher.idle, grace)
            await self._pool.cancel_all()
            await self._backend.stop()
            await self._commits.close()
        finally:
            self.clock.detach(self)
            self._closed.set()
            logger.info("engine closed (%d timers pending)", self.stats()["pending"])

    def _stop(self) -> None:
        """No new work, no callback, no compaction from now on (close, or a simulated crash)."""
        self._front.close()
        self._trigger.stop()
        self._dispatcher.closing = True
        self._commits.closing = True

    async def wait_closed(self) -> None:
        """Wait until :meth:`close` has finished (e.g. after a signal)."""
        await self._closed.wait()

    def install_signal_handlers(self, grace: float = 10.0) -> None:
        """Make SIGTERM and SIGINT close the engine gracefully (see :meth:`close`)."""
        signals.close_on_signals(self.close, grace, self._background)

    async def __aenter__(self) -> Engine:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def schedule(
        self,
        handler: str,
        *,
        at: datetime | float | None = None,
        delay: float | None = None,
        payload: Any = None,
        key: str | None = None,
        on_conflict: Literal["replace", "keep", "error"] = "replace",
        connection: Any = None,
    ) -> Coroutine[Any, Any, TimerInfo]:
        """Schedule ``handler`` with ``payload`` at ``at`` or after ``delay`` seconds.

        Returns once the schedule is committed to the journal, with the timer as it was
        scheduled (by then it may already have fired, if it was due at once). ``on_conflict``
        says what to do when ``key`` names a PENDING or RUNNING timer: ``"replace"`` it (new due
        time, payload and version), ``"keep"`` it (returned unchanged) or raise ``DuplicateKey``
        (``"error"``).

        Raises, before anything changes: ``UnknownHandler``; ``ValueError`` for both or neither
        of ``at``/``delay``, a naive datetime, a time that is negative, NaN, infinite or past
        the year 9999, a payload over ``max_payload_bytes``, an empty name or one that is not
        UTF-8 (lone surrogates); ``TypeError`` for a name that is not a ``str``, a payload
        msgpack cannot encode or that would not decode back equal. A ``str`` subclass is taken
        as the plain ``str`` it holds. The timer holds the payload as it decodes from msgpack
        (what a restart gives too): tuples come back as lists.

        A coroutine, as from an ``async def``: nothing happens until it runs (awaited, or as a
        task); its body is :func:`wheel_engine.front.schedule`. ``connection=``: write in that
        psycopg connection's transaction, on PostgreSQL (see ``docs/guide/several-nodes.md``)."""
        if connection is not None:  # issue 27: the caller's transaction
            return self._joined.schedule(connection, handler, at, delay, payload, key, on_conflict)
        return front_schedule(self._front, handler, at, delay, payload, key, on_conflict)

    async def schedule_many(
        self, requests: Iterable[Mapping[str, Any]], *, connection: Any = None
    ) -> list[TimerInfo]:
        """Schedule many timers in one commit. Each request takes :meth:`schedule`'s keywords.

        Every request is validated (conflicts with ``on_conflict="error"`` included) before any
        is applied: one bad request rejects them all and nothing changes."""
        if connection is not None:  # issue 27: the caller's transaction
            return await self._joined.schedule_many(connection, requests)
        self._front.check_open()
        return await self._storage.schedule_many(requests, self.clock.time())

    async def cancel(
        self, key: str, *, version: int | None = None, connection: Any = None
    ) -> CancelResult:
        """Cancel the timer ``key`` (only if ``version`` is its live version, when given).

        ``CANCELED`` is returned only once the cancel is committed; that version never fires."""
        if connection is not None:  # issue 27: the caller's transaction
            return await self._joined.cancel(connection, key, version)
        self._front.check_open()
        key = check_key(key)  # before anything changes: the Cancel record must be writable
        check_version(version)
        return await self._storage.cancel(key, version)

    def get(self, key: str) -> TimerInfo | None:
        """The timer ``key`` as held here (finished ones within retention); an outcome shows once
        its handler ended, before it commits. On PostgreSQL this node's share (see lookup)."""
        return self._table.info(key, self.clock.time())

    async def lookup(self, key: str) -> TimerInfo | None:
        """The timer ``key`` as the journal has it (in memory and SQLite: as :meth:`get`)."""
        self._front.check_open()
        return await self._storage.lookup(check_key(key), self.clock.time())

    def timers(
        self, state: TimerState | str | None = None, handler: str | None = None
    ) -> list[TimerInfo]:
        """Every timer known, optionally only those in ``state`` or for ``handler``."""
        wanted = None if state is None else TimerState(state)
        return self._table.select(wanted, handler, self.clock.time())

    def on_event(self, callback: Subscriber) -> Callable[[], None]:
        """``callback(event)`` on the loop per state change (see :mod:`.events`); -> unsubscribe."""
        return self._events.subscribe(callback)

    def stats(self) -> dict[str, Any]:
        """Counts by state, counters since start, lateness (seconds) and journal size; on
        PostgreSQL also this ``node`` and the ``partitions`` it owns."""
        stats = engine_stats(self._table, self._dispatcher, self._stats, self._commits)
        return {**stats, **self._backend.stats()}  # the node's figures on PostgreSQL

    async def redrive(self, key: str, *, at: datetime | float | None = None) -> TimerInfo:
        """Send a DEAD timer back to PENDING, due at ``at`` (default: now), attempts reset.

        It gets a new version (and so a new idempotency key): it is a new run of the work.
        """
        self._front.check_open()
        key = check_key(key)
        now = self.clock.time()
        due = now if at is None else due_time(now, at, None)
        return await self._storage.redrive(key, due, now)

    async def compact(self) -> None:
        """Rewrite the journal to the live state now, online (schedules keep working)."""
        self._front.check_open()
        await self._commits.compact()

    def busy(self) -> bool:
        """Work is in flight off the loop (journal commits, thread handlers)."""
        return bool(self._pool.threads) or self._commits.busy()

    async def quiesce(self) -> None:
        """Wait for the off-loop work that :meth:`busy` reports."""
        if self._pool.threads:
            await asyncio.wait(set(self._pool.threads))
        await self._commits.quiesce()
