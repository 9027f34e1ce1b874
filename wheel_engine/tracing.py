"""Tracing: the trace follows a timer from the request that scheduled it to every attempt.

With ``opentelemetry-api`` installed (extra ``otel``) and a tracer provider set by the
application before the engine starts, :func:`start` turns tracing on for that engine:

- ``schedule``, ``schedule_many`` and ``redrive`` each run in a short PRODUCER span
  (``schedule <handler>``, ``redrive <handler>``), and the W3C trace context of that span
  (``traceparent``, then a space and the ``tracestate`` when there is one) is stored with each
  timer they make: on the timer in memory and in its journal record (``journal.codec``'s
  optional trailing field; on PostgreSQL the row's ``trace`` column), so it survives
  restarts and compaction and reaches the node that fires it; a replacing schedule stores its
  own, a redrive the redriver's.
- ``schedule_recurring`` runs in a PRODUCER span ``schedule_recurring <handler>`` whose
  context the recurrence keeps (in its record) and every occurrence stores, however late and
  on whichever node it is materialised: each occurrence links to the call that created the
  recurrence, not to the occurrence before it (whose attempt commits the next one: that
  ``schedule recurring:<handler>`` span nests under the attempt, and no attempt links to it).
- every attempt runs in a CONSUMER span ``fire <handler>``, current while its handler runs (a
  handler's own spans nest under it: async handlers, thread handlers and plain ones alike),
  *linked* to the stored context. A link, not a parent: the request that scheduled the timer
  ended long ago (minutes, a restart, another node), its trace is closed, and a retry or a
  redrive is one more attempt of the same request, not a child of the previous attempt; each
  attempt is the root of a trace of its own that points back at its cause.
- the attempt span carries OpenTelemetry's messaging attributes where they fit
  (``messaging.system="wheel-engine"``, ``messaging.operation.type="process"``, the handler
  as the destination, the key as the message id) and the engine's own: key, version, attempt,
  lateness (seconds) and outcome (``succeeded``, ``retry``, ``dead``, ``canceled``,
  ``interrupted`` when the engine closed under it). A failed attempt (retry or dead) has
  status ERROR with the bounded text the handler's ``describe_error`` made of the exception
  (the timer's ``last_error``), never the raw exception text.

Without OpenTelemetry imported by the application, or without a tracer provider set,
:func:`start` returns None and changes nothing: no span, no context stored, no byte more in
the journal, and the engine's paths run as they do untraced (the scheduler's ``tracing``
stays None, one attribute test on the schedule path). This module never imports
OpenTelemetry at import time (``import wheel_engine`` does not load it).

How it hooks in: :class:`Tracing` sets the scheduler's ``tracing`` (the ContextVar whose value
the schedule paths store with the timers they make), wraps each registered handler (the span
around the call) and subscribes to the engine's events (the outcome ends the span). While it
is on, the engine takes its general fire path (an event subscriber is there).
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, TypeVar

from wheel_engine.events import Event, EventKind
from wheel_engine.model import TimerInfo

if TYPE_CHECKING:
    from wheel_engine.handlers import HandlerSpec
    from wheel_engine.model import Firing

__all__ = ["REQUESTED", "SCHEDULING", "Tracing", "current_context", "scheduling_in", "start"]

T = TypeVar("T")

#: The trace context the schedule paths store with the timers they make (None: none). Set by
#: :class:`Tracing` around a public call, read by the scheduler only while tracing is on.
SCHEDULING: ContextVar[str | None] = ContextVar("wheel_engine_scheduling", default=None)
#: A stored context asked for by :func:`scheduling_in`: the traced call made inside stores it
#: instead of its own span's. Cleared for the call itself, so nothing the call starts (a task,
#: a handler) inherits it.
REQUESTED: ContextVar[str | None] = ContextVar("wheel_engine_requested", default=None)

SYSTEM = "wheel-engine"  #: messaging.system
_OUTCOMES = {
    EventKind.SUCCEEDED: "succeeded",
    EventKind.RETRY: "retry",
    EventKind.DEAD: "dead",
    EventKind.CANCELED: "canceled",
}


def _trace_api() -> Any:
    """``opentelemetry.trace`` if the application uses OpenTelemetry and has set a tracer
    provider, else None. Imports nothing: an application that set a provider imported it."""
    api = sys.modules.get("opentelemetry.trace")
    if api is None:
        return None
    provider = api.get_tracer_provider()
    if isinstance(provider, api.ProxyTracerProvider | api.NoOpTracerProvider):
        return None  # the API's defaults: no provider set, every span would be a no-op
    return api


def enabled() -> bool:
    """True when an engine started now would trace (see :func:`start`)."""
    return _trace_api() is not None


def current_context() -> str | None:
    """The current trace context as the engine stores it (``traceparent[ tracestate]``), or
    None when there is none (or OpenTelemetry is not in use).

    For recurring timers (#25): store this with the recurrence when it is created, and make
    each occurrence's schedule inside :func:`scheduling_in` of it, so that every occurrence
    links to the recurrence's creator rather than to whatever is current then."""
    if _trace_api() is None:
        return None
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier)
    parent = carrier.get("traceparent")
    if not parent:
        return None
    state = carrier.get("tracestate")
    return f"{parent} {state}" if state else parent


@contextlib.contextmanager
def scheduling_in(context: str | None) -> Iterator[None]:
    """Timers scheduled inside (by a traced engine's public calls) store ``context`` (a stored
    trace context, as :func:`current_context` gives) instead of the call's own span's; None:
    their own, as outside. Asynchronous code inside keeps it across awaits (a ContextVar)."""
    token = REQUESTED.set(context)
    try:
        yield
    finally:
        REQUESTED.reset(token)


@contextlib.contextmanager
def _storing(context: str | None) -> Iterator[None]:
    """The schedule paths inside store ``context``; nothing inside sees a requested one."""
    stored, requested = SCHEDULING.set(context), REQUESTED.set(None)
    try:
        yield
    finally:
        REQUESTED.reset(requested)
        SCHEDULING.reset(stored)


def _link(context: str | None) -> list[Any] | None:
    """A one-link list to the stored ``context``, or None when there is none (or it is not a
    valid W3C context: a damaged context costs the link, never the attempt)."""
    if not context:
        return None
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    parent, _, state = context.partition(" ")
    carrier = {"traceparent": parent, "tracestate": state} if state else {"traceparent": parent}
    span_context = trace.get_current_span(
        TraceContextTextMapPropagator().extract(carrier)
    ).get_span_context()
    return [trace.Link(span_context)] if span_context.is_valid else None


class Tracing:
    """One engine's tracing while it is on; made by :func:`start`."""

    def __init__(self, engine: Any, api: Any) -> None:
        from opentelemetry import context as otel_context

        from wheel_engine import __version__

        self._api = api
        self._context = otel_context
        self._tracer = api.get_tracer("wheel_engine", __version__)
        self._timers = engine._table.timers
        self._handlers = engine._handlers
        self._originals: dict[str, HandlerSpec] = {}
        self._wrapped: dict[str, HandlerSpec] = {}
        self._open: dict[tuple[str, int], Any] = {}  # (key, version) -> its attempt's span
        engine._scheduler.tracing = SCHEDULING
        self._series = engine._series
        self._series.traced = True  # a recurrence keeps its creator's context
        self.wrap_new()
        self._unsubscribe = engine.on_event(self._on_event)

    # ------------------------------------------------------------------ the producer side
    async def producing(
        self, call: Awaitable[T], operation: str, handler: str | None, count: int = 1
    ) -> T:
        """Await ``call`` (a schedule, schedule_many, redrive or schedule_recurring) in a
        PRODUCER span, the timers it makes storing that span's context (or the one
        :func:`scheduling_in` asked for)."""
        api = self._api
        requested = REQUESTED.get()
        name = f"{operation} {handler}" if handler else operation
        attributes: dict[str, Any] = {
            "messaging.system": SYSTEM,
            "messaging.operation.type": "send",
            "messaging.operation.name": operation,
        }
        if handler:
            attributes["messaging.destination.name"] = handler
        if count != 1:
            attributes["messaging.batch.message_count"] = count
        with self._tracer.start_as_current_span(
            name,
            kind=api.SpanKind.PRODUCER,
            attributes=attributes,
            record_exception=False,  # its text may quote the caller's data
            set_status_on_exception=False,
        ) as span:
            try:
                with _storing(requested or current_context()):
                    result = await call
            except BaseException as exc:
                span.set_attribute("error.type", type(exc).__qualname__)
                span.set_status(api.StatusCode.ERROR, type(exc).__qualname__)
                raise
            if isinstance(result, TimerInfo):
                if not handler:  # a redrive of a timer another node holds: known now
                    span.update_name(f"{operation} {result.handler}")
                    span.set_attribute("messaging.destination.name", result.handler)
                span.set_attribute("messaging.message.id", result.key)
                span.set_attribute("wheel_engine.timer.key", result.key)
                span.set_attribute("wheel_engine.timer.version", result.version)
            return result

    # ------------------------------------------------------------------ the attempts
    def wrap(self, name: str, spec: HandlerSpec) -> HandlerSpec:
        """Register ``spec`` traced: its handler runs inside its attempt's span. Called with
        another handler's firing (a recurrence's occurrence handler calls the user's), it runs
        inside that handler's span: one span per attempt."""
        self._originals[name] = spec
        fn = spec.fn
        begin, enter, leave = self._begin, self._enter, self._leave
        if spec.is_async:

            async def traced_async(firing: Firing) -> Any:
                if firing.handler != name:
                    return await fn(firing)
                token = enter(begin(firing))
                try:
                    return await fn(firing)
                except BaseException as exc:
                    self._failed(firing, exc)
                    raise
                finally:
                    leave(token)

            traced: Callable[[Firing], Any] = traced_async
        else:

            def traced_plain(firing: Firing) -> Any:
                if firing.handler != name:
                    return fn(firing)
                token = enter(begin(firing))
                try:
                    return fn(firing)
                except BaseException as exc:
                    self._failed(firing, exc)
                    raise
                finally:
                    leave(token)

            traced = traced_plain
        wrapped = dataclasses.replace(spec, fn=traced)
        self._handlers[name] = self._wrapped[name] = wrapped
        return wrapped

    def wrap_new(self) -> None:
        """Wrap every handler registered since (a user's and the occurrence handler a
        recurrence derives from it)."""
        for name, spec in list(self._handlers.items()):
            if self._wrapped.get(name) is not spec:
                self.wrap(name, spec)

    def _begin(self, firing: Firing) -> Any:
        """The attempt's span, started now: a new trace (an empty parent context, not whatever
        the worker happens to carry), linked to the timer's stored context."""
        timer = self._timers.get(firing.key)
        stored = timer.trace if timer is not None and timer.version == firing.version else None
        span = self._tracer.start_span(
            f"fire {firing.handler}",
            context=self._context.Context(),
            kind=self._api.SpanKind.CONSUMER,
            links=_link(stored),
            attributes={
                "messaging.system": SYSTEM,
                "messaging.operation.type": "process",
                "messaging.operation.name": "fire",
                "messaging.destination.name": firing.handler,
                "messaging.message.id": firing.key,
                "wheel_engine.timer.key": firing.key,
                "wheel_engine.timer.version": firing.version,
                "wheel_engine.attempt": firing.attempt,
                "wheel_engine.lateness": firing.fired_at - firing.due,
            },
        )
        previous = self._open.pop((firing.key, firing.version), None)
        if previous is not None:  # its outcome never came (cannot happen): not left open
            previous.end()
        self._open[(firing.key, firing.version)] = span
        return span

    def _enter(self, span: Any) -> Any:
        return self._context.attach(self._api.set_span_in_context(span))

    def _leave(self, token: Any) -> None:
        self._context.detach(token)

    def _failed(self, firing: Firing, exc: BaseException) -> None:
        span = self._open.get((firing.key, firing.version))
        if span is not None:
            span.set_attribute("error.type", type(exc).__qualname__)

    def _on_event(self, event: Event) -> None:
        """An attempt's outcome ends its span (the event comes right after the handler)."""
        outcome = _OUTCOMES.get(event.kind)
        if outcome is None:
            return
        span = self._open.pop((event.key, event.version), None)
        if span is None:  # no attempt ran for it (a pending timer cancelled, say)
            return
        span.set_attribute("wheel_engine.outcome", outcome)
        if event.kind is EventKind.RETRY or event.kind is EventKind.DEAD:
            span.set_status(self._api.StatusCode.ERROR, event.error)
        span.end()

    def stop(self) -> None:
        """The engine closed: the spans of attempts cut short end ``interrupted``; the
        handlers are registered as they were."""
        self._unsubscribe()
        for span in self._open.values():
            span.set_attribute("wheel_engine.outcome", "interrupted")
            span.end()
        self._open.clear()
        self._handlers.update(self._originals)
        self._series.traced = False


def start(engine: Any) -> Tracing | None:
    """Turn tracing on for ``engine`` (a :class:`wheel_engine.Engine`, starting; typed ``Any``:
    the engine imports this module) if OpenTelemetry is in use with a tracer provider set, and
    decorate its public calls; None (nothing changed) otherwise."""
    api = _trace_api()
    if api is None:
        return None
    tracing = Tracing(engine, api)
    schedule, schedule_many = engine.schedule, engine.schedule_many
    redrive, register, close = engine.redrive, engine.register, engine.close
    schedule_recurring = engine.schedule_recurring

    def traced_schedule(handler: str, **options: Any) -> Any:
        return tracing.producing(schedule(handler, **options), "schedule", handler)

    async def traced_schedule_many(requests: Any, **options: Any) -> Any:  # connection=
        requests = list(requests)
        names = {r.get("handler") for r in requests if isinstance(r, dict)}
        name = names.pop() if len(names) == 1 else None
        call = schedule_many(requests, **options)
        return await tracing.producing(call, "schedule", name, len(requests))

    async def traced_redrive(key: str, **options: Any) -> Any:
        timer = tracing._timers.get(key)
        return await tracing.producing(redrive(key, **options), "redrive", timer and timer.handler)

    async def traced_schedule_recurring(*args: Any, **options: Any) -> Any:
        handler = args[1] if len(args) > 1 else options.get("handler")
        call = schedule_recurring(*args, **options)
        return await tracing.producing(call, "schedule_recurring", handler)

    def traced_register(name: str, fn: Any, **options: Any) -> None:
        register(name, fn, **options)
        tracing.wrap_new()

    async def traced_close(*args: Any, **kwargs: Any) -> None:
        try:
            await close(*args, **kwargs)
        finally:
            tracing.stop()

    # Instance attributes shadow the methods for this engine alone: an untraced engine
    # runs the methods themselves, with nothing in between.
    engine.schedule = traced_schedule
    engine.schedule_many = traced_schedule_many
    engine.redrive = traced_redrive
    engine.schedule_recurring = traced_schedule_recurring
    engine.register = traced_register
    engine.close = traced_close
    return tracing
