"""The engine: joins the timing wheel, the handler registry and the journal on an asyncio loop.

This module is the public half: registration, lifecycle and recovery, schedule, cancel, reading,
redrive and compaction. How due timers fire lives in :mod:`wheel_engine.dispatcher`.

How a timer moves (see ``docs/design.md``)::

    schedule() --commit--> PENDING in the wheel --due--> PENDING in the queue (not charged)
        --it can start--> RUNNING (its attempt committed just before its handler starts)
        --handler returns--> SUCCEEDED (ack, batched)
        --handler raises--> PENDING again after a backoff, or DEAD
    cancel():  PENDING --commit--> CANCELED;  RUNNING --> asked to stop (cancel_requested)

One loop timer is armed, for the earliest due tick; with nothing due the engine sleeps. When it
fires, every timer due by the wall clock is taken out of the wheel in (tick, version) order and
queued; they start in groups, at most ``max_concurrency`` at a time. Plain (non-async) handlers
run inline, like ``call_at`` callbacks; async ones are awaited by a small pool of worker tasks,
not one task each.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import math
import operator
import os
import secrets
import signal
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from journal import Cancel, Record, Redrive, Schedule
from wheel_engine.clock import Clock, SystemClock
from wheel_engine.diagnostics import DEFAULT_MAX_ERROR_BYTES, MIN_ERROR_BYTES, ErrorDescriber
from wheel_engine.dispatcher import (
    CANCELED,
    DEAD,
    PENDING,
    RUNNING,
    SUCCEEDED,
    Dispatcher,
    log_failure,
)
from wheel_engine.errors import DuplicateKey, EngineError, UnknownHandler
from wheel_engine.gcpause import gc_paused
from wheel_engine.handlers import HandlerFn, make_spec
from wheel_engine.model import CancelResult, TimerInfo, TimerState
from wheel_engine.retry import RetryPolicy
from wheel_engine.timer import INTERRUPT_CANCEL, INTERRUPT_CRASH, UNDECODED, Timer
from wheel_engine.validation import (
    MAX_TIME,
    ON_CONFLICT,
    check_key,
    check_name,
    due_time,
    encode_payload,
)
from wheel_engine.wheel import TimingWheel

if TYPE_CHECKING:
    from journal import TimerRow

logger = logging.getLogger(__name__)

F = TypeVar("F", bound=HandlerFn)

# A validated schedule request: (handler, due, payload, payload bytes, key or None, on_conflict)
_Request = tuple[str, float, Any, bytes | None, str | None, str]
# An applied schedule: (its request, the new timer, the live timer it replaced or None)
_Change = tuple[_Request, Timer, Timer | None]
_new_tuple = tuple.__new__
_STATE_BY_NAME = {state.value: state for state in TimerState}
_retention_order = operator.attrgetter("updated_at", "key")
_REQUEST_KEYS = frozenset({"handler", "at", "delay", "payload", "key", "on_conflict"})


class Engine(Dispatcher):
    """Durable timers on the running asyncio loop. See SPEC.md for the whole contract.

    Guarantees: a handler never runs before its timer's due time by the wall clock; every
    committed, uncancelled timer fires at least once (until a handler returns or it is DEAD);
    a cancel that returned ``CANCELED`` is final; with a journal all of that survives crashes.
    Not guaranteed: exactly once (handlers get ``Firing.idempotency_key`` for that).

    Finished timers (SUCCEEDED, CANCELED) stay readable for ``retention`` seconds, at most
    ``max_retained`` of them (the oldest are forgotten first, as soon as timers finish); DEAD
    ones stay until redriven. Memory and the journal are bounded by the live timers plus that
    window. Bad input raises before anything changes, in memory or in the journal.
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
    ) -> None:
        if not (tick > 0 and math.isfinite(tick)):
            raise ValueError("tick must be a positive number of seconds")
        if durability not in ("full", "normal"):
            raise ValueError('durability must be "full" or "normal"')
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")
        if not (isinstance(max_error_bytes, int) and max_error_bytes >= MIN_ERROR_BYTES):
            raise ValueError(f"max_error_bytes must be an int >= {MIN_ERROR_BYTES}")
        if not math.isfinite(MAX_TIME / tick):
            raise ValueError("tick is too small to place every due time")
        if not retention >= 0:  # NaN too; math.inf keeps finished timers up to max_retained
            raise ValueError("retention must be a number of seconds >= 0")
        if max_retained.__class__ is bool or not isinstance(max_retained, int) or max_retained < 0:
            raise ValueError("max_retained must be an int >= 0")
        super().__init__(
            tick=float(tick),
            max_concurrency=max_concurrency,
            clock=clock if clock is not None else SystemClock(),
            retention=float(retention),
            max_retained=max_retained,
            clock_check=clock_check,
            max_error_bytes=max_error_bytes,
        )
        self.path = None if path is None else os.fspath(path)
        self.durability = durability
        self.default_retry = default_retry if default_retry is not None else RetryPolicy()
        self.default_timeout = default_timeout
        self.max_payload_bytes = max_payload_bytes
        self.compact_min_records = compact_min_records
        self._background: set[asyncio.Future[Any]] = set()
        self._next_version = 1
        self._key_prefix = secrets.token_hex(6)  # engine-made keys: "<prefix>-<counter>"
        self._key_counter = itertools.count(1)
        self._closed = asyncio.Event()  # set once close() has finished
        self._compacting: asyncio.Task[Any] | None = None
        self._committing: dict[str, asyncio.Future[None]] = {}  # key -> its schedule's commit
        self._last_compaction: float | None = None

    # ------------------------------------------------------------------ handlers
    def handler(
        self,
        name: str,
        *,
        timeout: float | None = None,
        retry: RetryPolicy | None = None,
        thread: bool = False,
        describe_error: ErrorDescriber | None = None,
    ) -> Callable[[F], F]:
        """Decorator form of :meth:`register`."""

        def decorate(fn: F) -> F:
            self.register(
                name, fn, timeout=timeout, retry=retry, thread=thread, describe_error=describe_error
            )
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
    ) -> None:
        """Register ``fn`` under ``name``. Timers parked for want of it become due again.

        ``describe_error(exc) -> str`` decides what is kept of an exception the handler raised
        (``last_error``, the journal, the DEAD log line); see :mod:`wheel_engine.diagnostics`.
        """
        spec = make_spec(
            name,
            fn,
            timeout=timeout if timeout is not None else self.default_timeout,
            retry=retry if retry is not None else self.default_retry,
            thread=thread,
            describe_error=describe_error,
        )
        self._handlers[name] = spec
        # Recovery parks timers whose handler is not registered; they become due now.
        parked = self._unhandled.pop(name, None)
        if parked:
            for timer in parked.values():
                self._insert(timer)
            self._arm()

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Open and recover the journal, then start firing. Overdue timers fire at once."""
        if self._started:
            raise EngineError("engine already started")
        self._loop = asyncio.get_running_loop()
        self._idle = asyncio.Event()
        self._idle.set()
        now = self.clock.time()
        self._wheel = TimingWheel(self._tick_floor(now))
        if self.path is not None:
            await self._open_journal()
        self._started = True
        attach = getattr(self.clock, "attach", None)
        if attach is not None:
            attach(self)
        self._arm()
        self._loop.call_soon(self._on_tick)  # overdue timers fire at once

    async def _open_journal(self) -> None:
        from journal import Journal

        journal = await Journal.open(self.path or "", durability=self.durability)
        try:
            recovered = await journal.recover(progress=self._log_recovery_progress)
        except BaseException:
            await journal.close()
            raise
        self.journal = journal
        self._next_version = recovered.max_version + 1
        with gc_paused(len(recovered.timers)):
            counts = self._restore(recovered.timers.values())
        for key in recovered.interrupted:  # see Dispatcher._suspect_started: it starts alone
            self._timers[key].interrupt = INTERRUPT_CRASH
        logger.info(
            "recovered %s: %d records, %s, next version %d",
            self.path,
            recovered.records,
            ", ".join(f"{n} {s.lower()}" for s, n in counts.items() if n) or "no timers",
            self._next_version,
        )

    def _restore(self, rows: Iterable[TimerRow]) -> dict[str, int]:
        """Rebuild timers from the journal's rows; returns how many were in each state."""
        counts: dict[str, int] = dict.fromkeys(_STATE_BY_NAME, 0)
        timers = self._timers
        handlers = self._handlers
        finished: list[Timer] = []
        for row in rows:
            state = _STATE_BY_NAME[row.state]
            counts[row.state] += 1
            if state is RUNNING:  # interrupted by the crash: it runs again
                state = PENDING
            timer = Timer(
                row.key,
                row.version,
                row.handler,
                row.due,
                UNDECODED if row.payload is not None else None,
                state,
                row.attempts,
                row.last_error,
                row.first_attempt_at,
                row.updated_at,
            )
            timer.packed = row.payload  # decoded on first use: most are only ever fired
            timers[row.key] = timer
            if state is DEAD:
                self._dead[row.key] = timer
            elif state is not PENDING:
                finished.append(timer)
            elif row.handler in handlers:
                self._insert(timer)
            else:
                self._park(timer)
        # The retention window forgets from the front. The journal's compaction orders finished
        # rows the same way, by (updated_at, key), so both keep the same ones.
        finished.sort(key=_retention_order)
        self._finished = OrderedDict((timer.key, timer) for timer in finished)
        self._purge_finished(self.clock.time())
        return counts

    def _log_recovery_progress(self, done: int, total: int) -> None:
        logger.info("recovering %s: %d of %d records", self.path, done, total)

    async def close(self, grace: float = 10.0) -> None:
        """Stop dispatching, wait up to ``grace`` seconds for running handlers, then cancel them.

        Cancelled handlers are not acknowledged: they fire again after the next start. The
        journal is flushed (acks included) and closed. Idempotent.
        """
        if not self._started or self._closing:
            if self._closing:
                await self._closed.wait()
            return
        self._closing = True
        try:
            self._disarm()
            # Only handlers already running get the grace period; see _drop_unstarted.
            self._drop_unstarted()
            if self._running and grace > 0 and self._idle is not None:
                await self._wait_idle(grace)
            for task in list(self._workers):
                task.cancel()
            if self._workers:
                await asyncio.gather(*self._workers, return_exceptions=True)
            if self._compacting is not None:
                await asyncio.gather(self._compacting, return_exceptions=True)
            if self.journal is not None:
                try:
                    await self.journal.flush()
                finally:
                    await self.journal.close()
        finally:
            detach = getattr(self.clock, "detach", None)
            if detach is not None:
                detach(self)
            self._closed.set()
            logger.info("engine closed (%d timers pending)", self.stats()["pending"])

    async def _wait_idle(self, grace: float) -> None:
        assert self._idle is not None
        idle = asyncio.ensure_future(self._idle.wait())
        timeout = asyncio.ensure_future(self.clock.sleep(grace))
        try:
            await asyncio.wait({idle, timeout}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            idle.cancel()
            timeout.cancel()

    async def wait_closed(self) -> None:
        """Wait until :meth:`close` has finished (e.g. after a signal)."""
        await self._closed.wait()

    def install_signal_handlers(self, grace: float = 10.0) -> None:
        """Make SIGTERM and SIGINT close the engine gracefully (see :meth:`close`)."""
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self._close_soon, grace)

    def _close_soon(self, grace: float) -> None:
        logger.info("signal received: closing with %.1f s grace", grace)
        self._spawn(self.close(grace))

    async def __aenter__(self) -> Engine:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # ------------------------------------------------------------------ scheduling
    def _check_open(self) -> None:
        if not self._started:
            raise EngineError("engine not started: use 'async with engine' or await start()")
        if self._closing:
            raise EngineError("engine is closing: no new work is accepted")

    async def schedule(
        self,
        handler: str,
        *,
        at: datetime | float | None = None,
        delay: float | None = None,
        payload: Any = None,
        key: str | None = None,
        on_conflict: Literal["replace", "keep", "error"] = "replace",
    ) -> TimerInfo:
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
        """
        self._check_open()
        request = self._validate(handler, at, delay, payload, key, on_conflict, self.clock.time())
        timer, change = self._apply_schedule(request)
        info = timer.info()  # what was scheduled: it may fire (and change) before we resume
        if self.journal is not None:
            if change is not None:
                await self._commit([change])
            elif timer.key in self._committing:
                await self._wait_committed([timer.key])  # "keep" returns only what is durable
        return info

    async def schedule_many(self, requests: Iterable[Mapping[str, Any]]) -> list[TimerInfo]:
        """Schedule many timers in one commit. Each request takes :meth:`schedule`'s keywords.

        Every request is validated (conflicts with ``on_conflict="error"`` included) before any
        is applied: one bad request rejects them all and nothing changes.
        """
        self._check_open()
        if not isinstance(requests, list | tuple):
            requests = list(requests)
        with gc_paused(len(requests)):
            applied = self._schedule_many_now(requests)
            infos = [timer.info() for timer, _ in applied]  # as scheduled, before any firing
        if self.journal is not None:
            changes = [change for _, change in applied if change is not None]
            if changes:
                await self._commit(changes)
            kept = [timer.key for timer, change in applied if change is None]
            await self._wait_committed(kept)
        return infos

    def _schedule_many_now(
        self, requests: list[Mapping[str, Any]] | tuple[Mapping[str, Any], ...]
    ) -> list[tuple[Timer, _Change | None]]:
        """Validate every request, then apply them all: the synchronous part of schedule_many."""
        now = self.clock.time()
        validated: list[_Request] = []
        claimed: set[str] = set()  # keys this batch schedules, for on_conflict="error"
        for request in requests:
            if request.__class__ is not dict and not isinstance(request, Mapping):
                raise TypeError(f"schedule_many takes mappings, not {type(request).__name__}")
            if not request.keys() <= _REQUEST_KEYS:
                unknown = ", ".join(sorted(map(repr, set(request) - _REQUEST_KEYS)))
                raise TypeError(f"unknown schedule option(s): {unknown}")
            get = request.get
            valid = self._validate(
                get("handler"),
                get("at"),
                get("delay"),
                get("payload"),
                get("key"),
                get("on_conflict", "replace"),
                now,
            )
            key = valid[4]
            if key is not None:
                if key in claimed and valid[5] == "error":
                    raise DuplicateKey(f"key {key!r} appears twice in this batch")
                claimed.add(key)
            validated.append(valid)
        apply = self._apply_schedule
        return [apply(valid) for valid in validated]

    def _validate(
        self,
        handler: Any,
        at: datetime | float | None,
        delay: float | None,
        payload: Any,
        key: Any,
        on_conflict: str,
        now: float,
    ) -> _Request:
        """Check one request completely; nothing is changed. Raises on anything wrong.

        The values returned are the clean ones: names as plain ``str``, the due time in range,
        the payload as it decodes from its msgpack bytes (what a restart would give).
        """
        handler = check_name(handler, "handler")
        if handler not in self._handlers:
            raise UnknownHandler(f"no handler registered as {handler!r}")
        if on_conflict not in ON_CONFLICT:
            raise ValueError(f"on_conflict must be one of {ON_CONFLICT}, not {on_conflict!r}")
        kind = delay.__class__
        if at is None and (kind is float or kind is int) and 0 <= delay <= MAX_TIME:  # type: ignore[operator]
            due = now + delay  # type: ignore[operator]
            if due > MAX_TIME:
                due = due_time(now, at, delay)  # raises, with the reason
        else:
            due = due_time(now, at, delay)
        if key is not None:
            key = check_key(key)
            if on_conflict == "error":
                live = self._timers.get(key)
                if live is not None and live.state.is_live:
                    raise DuplicateKey(f"key {key!r} names a live timer (version {live.version})")
        data = None
        if payload is not None:
            data, payload = encode_payload(payload, self.max_payload_bytes)
        return handler, due, payload, data, key, on_conflict

    def _apply_schedule(self, request: _Request) -> tuple[Timer, _Change | None]:
        """Put a validated schedule into memory. Returns the timer and, unless an existing
        timer was kept, the change to commit (or undo)."""
        handler, due, payload, _, key, on_conflict = request
        previous = None
        if key is None:
            key = f"{self._key_prefix}-{next(self._key_counter)}"
        else:
            previous = self._timers.get(key)
            if previous is not None and previous.state.is_live:
                if on_conflict == "keep":
                    return previous, None
                if previous.state is PENDING:
                    self._unplace(previous)
        version = self._next_version
        self._next_version = version + 1
        timer = Timer(key, version, handler, due, payload)
        self._timers[key] = timer
        if previous is not None:
            self._finished.pop(key, None)
            self._dead.pop(key, None)
        self._insert(timer)
        armed = self._armed_tick
        if armed is None or timer.tick < armed:
            self._arm()
        return timer, (request, timer, previous)

    async def _commit(self, changes: list[_Change]) -> None:
        """Commit schedules; on failure take them back out of memory, newest first.

        The hottest await of a durable engine, so it allocates nothing beyond its records:
        no closure for the undo, no list of keys (see :meth:`_commit_or_undo` for the rules).
        """
        journal = self.journal
        assert journal is not None
        now = self.clock.time()
        new = _new_tuple
        records: list[Record] = [
            new(Schedule, (timer.key, timer.version, timer.handler, timer.due, request[3], now))
            for request, timer, _ in changes
        ]
        committing = self._committing
        future = None
        try:
            future = journal.submit(records)  # raises if the journal is closed or has failed
            for _, timer, _ in changes:
                committing[timer.key] = future
            await future
        except asyncio.CancelledError:
            raise
        except BaseException:
            for _, timer, previous in reversed(changes):
                self._undo_schedule(timer, previous)
            raise
        finally:
            if future is not None and not future.cancelled():
                for _, timer, _ in changes:
                    if committing.get(timer.key) is future:
                        del committing[timer.key]
        self._maybe_compact()

    async def _commit_or_undo(
        self, records: list[Record], undo: Callable[[], None], keys: Iterable[str] = ()
    ) -> None:
        """Commit ``records``, which describe a change already made in memory, and wait for it.

        If the commit fails, ``undo`` takes the change back out of memory before the caller
        sees the error. While the commit is in flight, ``keys`` lead to it, so that
        ``on_conflict="keep"`` can wait for it.

        A caller cancelled while it waits does not withdraw the records (the journal commits
        them anyway) and undoes nothing: the change stands in memory as it will in the journal.
        Only if that commit then also fails do the two differ until the next start; no promise
        was broken, since that caller was never told the change was made. Watching for that
        double fault cost a callback and a future per call, which halved the throughput of
        10,000 concurrent schedules.
        """
        assert self.journal is not None
        committing = self._committing
        future = None
        try:
            future = self.journal.submit(records)  # raises if the journal is closed or failed
            for key in keys:
                committing[key] = future
            await future
        except asyncio.CancelledError:
            raise
        except BaseException:
            undo()
            raise
        finally:
            if future is not None and not future.cancelled():
                for key in keys:
                    if committing.get(key) is future:
                        del committing[key]
        self._maybe_compact()

    async def _wait_committed(self, keys: Iterable[str]) -> None:
        """Wait for the in-flight commits of these keys' schedules (raises if one failed)."""
        pending = {self._committing[key] for key in keys if key in self._committing}
        if not pending:
            return
        await asyncio.wait(pending)  # never cancels them, whoever else is waiting
        for future in pending:
            if future.cancelled():  # its own caller gave up waiting: ask the writer instead
                assert self.journal is not None
                await self.journal.flush()
            elif (error := future.exception()) is not None:
                raise error

    def _undo_schedule(self, timer: Timer, previous: Timer | None) -> None:
        if self._timers.get(timer.key) is not timer:
            return  # replaced again meanwhile; that later call owns the key
        if timer.state is PENDING:
            self._unplace(timer)
        timer.state = CANCELED  # this version never existed durably: it must not fire
        if previous is None:
            del self._timers[timer.key]
            return
        self._timers[timer.key] = previous
        if previous.state is PENDING:
            self._place(previous)
            self._arm()
        elif previous.state is DEAD:
            self._dead[timer.key] = previous
        else:
            self._finished[timer.key] = previous
            self._purge_finished(self.clock.time())

    # ------------------------------------------------------------------ cancelling
    async def cancel(self, key: str, *, version: int | None = None) -> CancelResult:
        """Cancel the timer ``key`` (only if ``version`` is its live version, when given).

        ``CANCELED`` is returned only once the cancel is committed; that version never fires.
        """
        self._check_open()
        key = check_key(key)  # before anything changes: the Cancel record must be writable
        if version is not None and (version.__class__ is bool or not isinstance(version, int)):
            raise TypeError(f"version must be an int, not {type(version).__name__}")
        timer = self._timers.get(key)
        if timer is None or (version is not None and version != timer.version):
            return CancelResult.NOT_FOUND
        if timer.state is RUNNING:
            self._interrupt(timer, INTERRUPT_CANCEL)
            return CancelResult.CANCEL_REQUESTED
        if timer.state is not PENDING:
            return CancelResult.NOT_FOUND if self._forgotten(timer) else CancelResult.ALREADY_DONE
        self._unplace(timer)
        self._finish(timer, CANCELED)
        self._stats.canceled += 1
        if self.journal is not None:
            record = Cancel(key, timer.version, timer.updated_at)
            await self._commit_or_undo([record], functools.partial(self._undo_cancel, timer))
        return CancelResult.CANCELED

    def _undo_cancel(self, timer: Timer) -> None:
        current = self._timers.get(timer.key)
        # Retention may have forgotten it already (retention=0): then it comes back too.
        if timer.state is CANCELED and (current is timer or current is None):
            if self._finished.get(timer.key) is timer:
                del self._finished[timer.key]
            self._timers[timer.key] = timer
            timer.state = PENDING
            self._stats.canceled -= 1
            self._insert(timer)
            self._arm()

    # ------------------------------------------------------------------ reading
    def get(self, key: str) -> TimerInfo | None:
        """The timer ``key`` as it is now (finished ones until their retention runs out)."""
        timer = self._timers.get(key)
        if timer is None or self._forgotten(timer):
            return None
        return timer.info()

    def timers(
        self, state: TimerState | str | None = None, handler: str | None = None
    ) -> list[TimerInfo]:
        """Every timer known, optionally only those in ``state`` or for ``handler``."""
        wanted = None if state is None else TimerState(state)
        horizon = self.clock.time() - self.retention
        return [
            timer.info()
            for timer in self._timers.values()
            if (wanted is None or timer.state is wanted)
            and (handler is None or timer.handler == handler)
            and not self._forgotten(timer, horizon)
        ]

    def _forgotten(self, timer: Timer, horizon: float | None = None) -> bool:
        """Finished before ``horizon`` (default: now - retention) but not purged yet (no tick
        or finish since): reads do not see it, as they would not after a restart."""
        state = timer.state
        if state is not SUCCEEDED and state is not CANCELED:
            return False
        if horizon is None:
            horizon = self.clock.time() - self.retention
        return timer.updated_at <= horizon

    def stats(self) -> dict[str, Any]:
        """Counts by state, counters since start, lateness (seconds) and journal size."""
        unhandled = sum(len(parked) for parked in self._unhandled.values())
        p50, p99 = self._stats.lag_percentiles()
        return {  # O(1) but for the lag percentiles: metrics scrape this on a live loop
            "pending": len(self._wheel) + unhandled + self._queued,
            "running": self._running,
            "dead": len(self._dead),
            "unhandled": unhandled,
            "unhandled_handlers": sorted(self._unhandled),
            "fired": self._stats.fired,
            "succeeded": self._stats.succeeded,
            "retried": self._stats.retried,
            "canceled": self._stats.canceled,
            "dead_total": self._stats.dead,
            "redriven": self._stats.redriven,
            "lag_p50": p50,
            "lag_p99": p99,
            "lag_max": self._stats.lag_max,
            "journal_records": self.journal.tail_records if self.journal is not None else 0,
            "last_compaction": self._last_compaction,
        }

    # ------------------------------------------------------------------ dead letters
    async def redrive(self, key: str, *, at: datetime | float | None = None) -> TimerInfo:
        """Send a DEAD timer back to PENDING, due at ``at`` (default: now), attempts reset.

        It gets a new version (and so a new idempotency key): it is a new run of the work.
        """
        self._check_open()
        key = check_key(key)
        now = self.clock.time()
        due = now if at is None else due_time(now, at, None)
        timer = self._timers.get(key)
        if timer is None:
            raise KeyError(key)
        if timer.state is not DEAD:
            raise EngineError(f"timer {key!r} is {timer.state.value}, not DEAD")
        fresh = Timer(key, self._next_version, timer.handler, due, timer.payload)
        self._next_version += 1
        fresh.packed = timer.packed
        fresh.last_error = timer.last_error  # kept for reading; attempts start again at 0
        fresh.updated_at = now
        self._timers[key] = fresh
        self._finished.pop(key, None)
        del self._dead[key]
        self._place(fresh)
        self._arm()
        info = fresh.info()
        if self.journal is not None:
            await self._commit_or_undo(
                [Redrive(key, timer.version, fresh.version, due, now)],
                functools.partial(self._undo_schedule, fresh, timer),
                [key],
            )
        self._stats.redriven += 1
        logger.info("redriven %s: version %d -> %d", key, timer.version, fresh.version)
        return info

    # ------------------------------------------------------------------ compaction
    async def compact(self) -> None:
        """Rewrite the journal to the live state now, online (schedules keep working)."""
        self._check_open()
        if self.journal is None:
            return
        if self._compacting is not None:
            await asyncio.shield(self._compacting)
            return
        self._compacting = asyncio.ensure_future(self._run_compaction())
        await asyncio.shield(self._compacting)

    async def _run_compaction(self) -> None:
        assert self.journal is not None
        self._purge_finished(self.clock.time())
        try:
            result = await self.journal.compact(
                retention=self.retention, now=self.clock.time(), max_retained=self.max_retained
            )
            self._last_compaction = self.clock.time()
            logger.info("compacted %s: %s", self.path, result)
        finally:
            self._compacting = None
        # What churn committed meanwhile may be over the trigger already: fold it now rather
        # than at the next commit, so an idle engine is never left with an outsized tail.
        self._maybe_compact()

    def _maybe_compact(self) -> None:
        """Compaction runs on its own once history outweighs the live timers (bounded file).

        ``_timers`` holds the live and DEAD timers plus the retention window (purged as timers
        finish), which is what the snapshot will hold: the file stays within about three times
        that, however many timers have finished.
        """
        journal = self.journal
        if journal is None or self._compacting is not None or self._closing:
            return
        if journal.tail_records > max(self.compact_min_records, 2 * len(self._timers)):
            self._compacting = asyncio.ensure_future(self._run_compaction())
            self._compacting.add_done_callback(log_failure)

    # ------------------------------------------------------------------ test support
    def busy(self) -> bool:
        """Work is in flight off the loop (journal commits, thread handlers)."""
        return bool(self._threads) or (self.journal is not None and self.journal.busy())

    async def quiesce(self) -> None:
        """Wait for the off-loop work that :meth:`busy` reports."""
        if self._threads:
            await asyncio.wait(set(self._threads))
        if self.journal is not None and self.journal.busy():
            await self.journal.flush()

    def _spawn(self, coro: Any) -> None:
        future = asyncio.ensure_future(coro)
        self._background.add(future)
        future.add_done_callback(self._background.discard)
