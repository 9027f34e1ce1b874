"""The handler registry: timers name their handler by string, resolved only here.

Names are the only thing the journal stores about a handler, so a journal replayed in a new
process can never make the engine run code that was not registered in that process.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, Unpack

from wheel_engine.diagnostics import ErrorDescriber
from wheel_engine.limit_options import HandlerLimits, LimitOptions, check_limits
from wheel_engine.model import Firing
from wheel_engine.retry import RetryPolicy

if TYPE_CHECKING:
    from wheel_engine.timer import Timer

HandlerFn = Callable[[Firing], Awaitable[Any]] | Callable[[Firing], Any]


class Successor(NamedTuple):
    """A timer that must exist from its predecessor's attempt on: it is committed with that
    attempt, unless its key is known already (:mod:`wheel_engine.successors`)."""

    key: str
    handler: str
    due: float
    payload: Any  #: the decoded value (msgpack-plain: a payload that was accepted once)
    trace: str | None  #: the trace context it is scheduled in (tracing, #29), or None


#: Given the timer whose attempt is being committed, its successor or None; in memory only,
#: no I/O (it runs inside the start of a group of attempts).
SuccessorFn = Callable[["Timer"], Successor | None]


class HandlerOptions(LimitOptions, total=False):
    """The options of ``Engine.register`` and ``Engine.handler`` (all keyword, all optional)."""

    timeout: float | None
    retry: RetryPolicy | None
    thread: bool
    describe_error: ErrorDescriber | None


@dataclass(frozen=True, slots=True)
class HandlerSpec:
    """A registered handler and how to run it."""

    name: str
    fn: HandlerFn
    timeout: float | None
    retry: RetryPolicy
    is_async: bool  #: a coroutine function: awaited by a worker
    thread: bool  #: a plain function run in a worker thread
    inline: bool  #: a plain function run on the loop, like a call_at callback
    describe_error: ErrorDescriber | None = None  #: what to keep of an exception (last_error)
    #: its flow control (``concurrency``, ``rate``): None when only ``max_concurrency`` applies
    limits: HandlerLimits | None = None
    #: recurring's occurrence handlers only (#25): the next occurrence, committed with the
    #: attempt (:mod:`wheel_engine.successors`); None for every registered handler
    successor: SuccessorFn | None = None
    #: an async handler whose first step may run inline (:mod:`wheel_engine.eager`); not
    #: recurring's occurrence handlers, whose successors are planned with a start group
    eager: bool = False


def make_spec(
    name: str,
    fn: HandlerFn,
    *,
    timeout: float | None,
    retry: RetryPolicy,
    thread: bool,
    describe_error: ErrorDescriber | None = None,
    **options: Unpack[LimitOptions],
) -> HandlerSpec:
    """Check a registration and describe it. Raises before anything is registered."""
    if not isinstance(name, str) or not name:
        raise ValueError("a handler name must be a non-empty string")
    if not callable(fn):
        raise TypeError(f"handler {name!r} is not callable: {fn!r}")
    is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - async callable objects
    )
    if thread and is_async:
        raise ValueError(f"handler {name!r}: thread=True is for plain functions, not async ones")
    if timeout is not None and not (timeout > 0 and timeout != float("inf")):
        raise ValueError(f"handler {name!r}: timeout must be a positive number of seconds")
    if describe_error is not None and not callable(describe_error):
        raise TypeError(f"handler {name!r}: describe_error is not callable: {describe_error!r}")
    raw: Mapping[str, object] = options  # unchecked values: compiled code would reject them
    limits = check_limits(
        name,
        raw.get("concurrency"),
        raw.get("rate"),
        raw.get("burst"),
        raw.get("limit_scope", "node"),
    )
    inline = not is_async and not thread
    return HandlerSpec(
        name, fn, timeout, retry, is_async, thread, inline, describe_error, limits, eager=is_async
    )
