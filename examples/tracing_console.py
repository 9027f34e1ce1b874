"""Tracing with the console exporter: the spans of a timer scheduled in one request and fired
later print to stdout.

    pip install 'wheel-engine[otel]' opentelemetry-sdk
    python examples/tracing_console.py

The application sets its tracer provider before the engine starts; the engine then traces
(``docs/guide/operations.md``, "Tracing"). A virtual clock stands in for the hour's wait.
"""

from __future__ import annotations

import asyncio

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

from wheel_engine import Engine, Firing
from wheel_engine.testing import VirtualClock

tracer = trace.get_tracer("shop")


async def main() -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
    trace.set_tracer_provider(provider)

    clock = VirtualClock()
    engine = Engine(None, clock=clock)

    @engine.handler("send_reminder")
    async def send_reminder(firing: Firing) -> None:
        with tracer.start_as_current_span("email the customer"):  # nests under "fire ..."
            pass

    async with engine:
        with tracer.start_as_current_span("POST /orders"):  # the request that asks for it
            await engine.schedule("send_reminder", delay=3600, key="order-42")
        await clock.advance(3600)  # "fire send_reminder" is linked to "schedule send_reminder"
    provider.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
