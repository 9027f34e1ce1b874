"""An SDK tracer provider with an in-memory exporter, set for one test and taken back after
(OpenTelemetry sets its global provider once per process: the tests reset it, as the SDK's own
test helpers do, so no engine outside tests/tracing ever traces)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import pytest

trace = pytest.importorskip("opentelemetry.trace")
sdk_trace = pytest.importorskip("opentelemetry.sdk.trace")
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from opentelemetry.util._once import Once  # noqa: E402


def reset_provider() -> None:
    trace._TRACER_PROVIDER = None  # type: ignore[attr-defined]
    trace._TRACER_PROVIDER_SET_ONCE = Once()  # type: ignore[attr-defined]


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Every span ended while the test runs (``spans.get_finished_spans()``)."""
    exporter = InMemorySpanExporter()
    provider = sdk_trace.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    reset_provider()
    trace.set_tracer_provider(provider)
    try:
        yield exporter
    finally:
        provider.shutdown()
        reset_provider()


@pytest.fixture
def untraced(spans: InMemorySpanExporter) -> Callable[[], contextlib.AbstractContextManager[None]]:
    """``with untraced():`` no tracer provider is set inside (an engine started there writes
    what an engine wrote before tracing existed); the test's provider is set again after."""

    @contextlib.contextmanager
    def without() -> Iterator[None]:
        provider = trace.get_tracer_provider()
        reset_provider()
        try:
            yield
        finally:
            reset_provider()
            trace.set_tracer_provider(provider)

    return without
