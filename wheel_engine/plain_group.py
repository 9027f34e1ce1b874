"""A committed start group's plain handlers, run on the loop one after another.

:class:`~wheel_engine.dispatcher.Dispatcher` calls :func:`run_plain_group` once a group's attempts
are committed (the general path; the in-memory common case is :mod:`wheel_engine.inline`). Each
plain handler runs like a ``call_at`` callback: to its end, on the loop thread. A handler that
raises goes to :class:`~wheel_engine.outcomes.Outcomes` at once (retry or DEAD); the ones that
returned are acknowledged together, in one call, so their acks share one journal write.

Only while someone listens to events is each handler timed (two clock reads each): the
events' ``at`` (and the acks') is then the group's end, otherwise the group's start.
"""

from __future__ import annotations

import asyncio

from wheel_engine.clock import Clock
from wheel_engine.events import EventBus
from wheel_engine.firing import firing_for
from wheel_engine.handlers import HandlerSpec
from wheel_engine.outcomes import Outcomes
from wheel_engine.stats import Counters
from wheel_engine.timer import INTERRUPT_CANCEL, Timer


def run_plain_group(
    inline: list[Timer],
    handlers: dict[str, HandlerSpec],
    outcomes: Outcomes,
    stats: Counters,
    events: EventBus,
    clock: Clock,
) -> None:
    """Run each timer's plain handler; then acknowledge those that returned, in one call.

    A timer cancelled while its attempt committed ends CANCELED without running."""
    now = clock.time()
    succeeded: list[Timer] = []
    durations: list[float] | None = [] if events.active else None
    started = now
    for timer in inline:
        if timer.interrupt == INTERRUPT_CANCEL:
            outcomes.complete(timer, asyncio.CancelledError(), cancelled=True)
            continue
        if durations is not None:
            started = clock.time()
        try:
            handlers[timer.handler].fn(firing_for(timer, now, stats, events))
        except Exception as exc:
            ran = None if durations is None else clock.time() - started
            outcomes.complete(timer, exc, duration=ran)
            continue
        succeeded.append(timer)
        if durations is not None:
            durations.append(clock.time() - started)
    if succeeded:
        outcomes.succeed(succeeded, now if durations is None else clock.time(), durations)
