"""What the end of an attempt means for its timer: SUCCEEDED, CANCELED, a retry or DEAD.

Each outcome changes the timer in memory at once and hands its record (Ack, Cancel, Retry,
Dead) to the journal without waiting (:meth:`wheel_engine.commits.Commits.write`): a lost ack
only means that the timer fires again after a restart. A timer replaced by a newer version
while its attempt ran keeps its outcome record but no longer changes the table. Each outcome
is then emitted on the engine's :class:`~wheel_engine.events.EventBus` (if anyone listens),
with the handler's ``duration`` when it ran.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from journal import Cancel, Dead, Retry
from wheel_engine import diagnostics
from wheel_engine.clock import Clock
from wheel_engine.commits import Commits
from wheel_engine.errors import PermanentError
from wheel_engine.events import EventBus
from wheel_engine.stats import Counters
from wheel_engine.timer import INTERRUPT_TIMEOUT, Timer
from wheel_engine.timers import CANCELED, DEAD, TimerTable

logger = logging.getLogger(__name__)


class Outcomes:
    """Turns attempts' ends into state changes and records; see the module docstring."""

    def __init__(
        self,
        table: TimerTable,
        commits: Commits,
        stats: Counters,
        clock: Clock,
        events: EventBus,
        *,
        arm: Callable[[], None],
        max_error_bytes: int,
    ) -> None:
        self._handlers = table.handlers
        self._events = events
        self._table = table
        self._current = table.timers
        self._finished = table.finished
        self._commits = commits
        self._stats = stats
        self._clock = clock
        self._arm = arm
        self._max_error_bytes = max_error_bytes
        self._hook_failed: set[str] = set()  # handlers whose describe_error raised (logged)

    def complete(
        self,
        timer: Timer,
        error: BaseException | None,
        cancelled: bool = False,
        duration: float | None = None,
    ) -> None:
        """Record how an attempt ended: success, cancel, retry or dead.

        ``error`` is None only when the handler returned normally: that is a success even if a
        cancel was requested meanwhile (the work was done). A cancelled attempt that raised
        anything is CANCELED: it stopped, as it was asked to. ``duration`` (seconds its handler
        ran, None if it never started or nobody listens) only goes into the event.
        """
        interrupt = timer.interrupt
        timer.interrupt = None
        current = self._table.timers.holds(timer)
        now = self._clock.time()
        if error is None:
            self.succeed([timer], now, None if duration is None else [duration])
            return
        if cancelled:
            self._stats.canceled += 1
            self._commits.write([Cancel(timer.key, timer.version, now)])
            if current:
                self._table.finish(timer, CANCELED, now)
            if self._events.active:
                self._events.canceled(timer, now, duration)
            return
        spec = self._handlers.get(timer.handler)
        if interrupt == INTERRUPT_TIMEOUT and spec is not None:
            message = f"timed out after {spec.timeout} s"
        else:
            message = diagnostics.describe(
                error,
                spec.describe_error if spec is not None else None,
                self._max_error_bytes,
                handler=timer.handler,
                failed_hooks=self._hook_failed,
            )
            if logger.isEnabledFor(logging.DEBUG):
                # The described, bounded text only, as last_error: a raw traceback would carry
                # the exception's own words (a payload, a secret) past describe_error and its
                # bound.
                logger.debug(
                    "handler %r failed: timer %s (version %d, attempt %d): %s",
                    timer.handler,
                    timer.key,
                    timer.version,
                    timer.attempts,
                    diagnostics.one_line(message),
                )
        timer.last_error = message
        delay = None
        if spec is not None and not isinstance(error, PermanentError):
            first = timer.first_attempt_at if timer.first_attempt_at is not None else now
            delay = spec.retry.next_delay(timer.attempts, first_attempt_at=first, now=now)
        if delay is None:
            self.give_up(timer, message, now, current, duration)
            return
        self._stats.retried += 1
        due = now + delay
        self._commits.write([Retry(timer.key, timer.version, timer.attempts, message, due, now)])
        if current:
            timer.retry(due, now)
            self._table.place(timer)
            self._arm()
        if self._events.active:  # also when replaced meanwhile: this version will retry
            self._events.retry(timer, now, duration, due, message)

    def succeed(
        self, timers: list[Timer], now: float, durations: list[float] | None = None
    ) -> None:
        """Handlers returned normally: SUCCEEDED, with one batch of acks for the journal.

        ``durations`` (one per timer, when measured) only go into the events."""
        for timer in timers:
            self.succeeded(timer, now)  # compiled: a native call (a bound alias would not be)
        events = self._events
        if events.active:  # also for a timer replaced while it ran: its attempt is acked
            for i, timer in enumerate(timers):
                events.succeeded(timer, now, durations[i] if durations else None)
        self._table.purge_finished(now)
        self._commits.ack(timers, now)

    def succeeded(self, timer: Timer, now: float) -> None:
        """``timer``'s handler returned normally: counted, and SUCCEEDED unless replaced while
        it ran. The one place a success is recorded in memory; its event and ack are the
        caller's (:meth:`succeed`, or the inline runner, whose sink keeps no acks)."""
        self._stats.succeeded += 1
        timer.interrupt = None
        if self._current.holds(timer):  # not replaced while it ran
            timer.succeed(now)
            self._finished.add(timer)

    def give_up(
        self,
        timer: Timer,
        message: str,
        now: float,
        current: bool = True,
        duration: float | None = None,
    ) -> None:
        """No attempt more: DEAD, kept until redriven (and one WARNING line). ``duration`` is
        None when no handler ran for this decision (an interrupted last attempt)."""
        timer.last_error = message
        self._stats.dead += 1
        self._commits.write([Dead(timer.key, timer.version, timer.attempts, message, now)])
        if current:
            self._table.finish(timer, DEAD, now)
        if self._events.active:
            self._events.dead(timer, now, duration, message)
        logger.warning(  # the bounded text, never the payload
            "timer %s (version %d) is DEAD after %d attempt(s): %s",
            timer.key,
            timer.version,
            timer.attempts,
            diagnostics.one_line(message),
        )
