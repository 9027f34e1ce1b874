"""One side of test_tracing_restart: ``schedule DB`` or ``fire DB`` in a process of its own,
with an in-memory exporter; prints one JSON line of what it saw."""

from __future__ import annotations

import asyncio
import json
import sys

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from wheel_engine import Engine
from wheel_engine.testing import VirtualClock


async def main(step: str, path: str) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    clock = VirtualClock()
    engine = Engine(path, clock=clock)
    engine.register("h", lambda firing: None)
    async with engine:
        if step == "schedule":
            await engine.schedule("h", delay=3600, key="k")
            await engine.compact()  # the context must outlive its record: a snapshot row
        else:
            await clock.advance(7200)
    seen = {
        s.name: {
            "span": s.context.span_id,
            "links": [link.context.span_id for link in s.links],
            "outcome": (s.attributes or {}).get("wheel_engine.outcome"),
        }
        for s in exporter.get_finished_spans()
    }
    print(json.dumps(seen))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
