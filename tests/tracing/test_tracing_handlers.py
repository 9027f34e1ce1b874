"""Every kind of handler gets its attempt span and runs inside it: bound methods (async and
plain), a thread handler, and a callable object."""

from __future__ import annotations

from typing import Any

from opentelemetry import trace

from wheel_engine import Engine, Firing
from wheel_engine.testing import VirtualClock


class Service:
    """Handlers as instance methods, as a service registers its own."""

    def __init__(self) -> None:
        self.seen: dict[str, int] = {}

    def _note(self, firing: Firing) -> None:
        self.seen[firing.handler] = trace.get_current_span().get_span_context().span_id

    async def remind(self, firing: Firing) -> None:
        self._note(firing)

    def expire(self, firing: Firing) -> None:
        self._note(firing)

    async def __call__(self, firing: Firing) -> None:
        self._note(firing)


async def test_methods_threads_and_callables_run_in_their_attempt_span(spans: Any) -> None:
    clock = VirtualClock()
    engine = Engine(None, clock=clock)
    service = Service()
    engine.register("remind", service.remind)
    engine.register("expire", service.expire)
    engine.register("blocking", service.expire, thread=True)
    async with engine:
        engine.register("callable", service)  # after start: wrapped as it is registered
        with trace.get_tracer("app").start_as_current_span("request"):
            for name in ("remind", "expire", "blocking", "callable"):
                await engine.schedule(name, delay=1, key=name)
        await clock.advance(2)
    # close() waited for the thread handler: every outcome is in (none is "interrupted")
    produced = {s.name: s for s in spans.get_finished_spans() if s.name.startswith("schedule")}
    for name in ("remind", "expire", "blocking", "callable"):
        (fired,) = [s for s in spans.get_finished_spans() if s.name == f"fire {name}"]
        assert fired.kind is trace.SpanKind.CONSUMER
        assert fired.attributes["wheel_engine.outcome"] == "succeeded"
        assert service.seen[name] == fired.context.span_id
        link = produced[f"schedule {name}"].context.span_id
        assert [k.context.span_id for k in fired.links] == [link]
