"""What tracing costs per timer: in memory, schedule then fire N timers (plain handler, the
virtual clock), untraced and traced in alternating rounds in one process.

    python -m bench.compare.tracing_cost [N] [ROUNDS]

Traced means an SDK ``TracerProvider`` whose spans go to an exporter that drops them (what the
engine pays, not what an exporter pays): two spans per timer (``schedule``, ``fire``), the
stored context, the general fire path. Prints microseconds per timer, the median of the rounds.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

from wheel_engine import Engine
from wheel_engine.testing import VirtualClock


class _Dropping:
    """A span exporter that keeps nothing."""

    def export(self, spans: Sequence[Any]) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def _provider(traced: bool) -> Any:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.util._once import Once

    trace._TRACER_PROVIDER = None  # a fresh global, as the SDK's own tests do
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    if not traced:
        return None
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(_Dropping()))  # type: ignore[arg-type]
    trace.set_tracer_provider(provider)
    return provider


async def _round(n: int, traced: bool) -> float:
    provider = _provider(traced)
    clock = VirtualClock()
    engine = Engine(None, clock=clock)
    engine.register("h", lambda firing: None)
    async with engine:
        assert ("schedule" in vars(engine)) == traced
        started = time.perf_counter()
        for _ in range(n):
            await engine.schedule("h", delay=1.0)
        await clock.advance(2.0)
        elapsed = time.perf_counter() - started
        assert engine.stats()["succeeded"] == n
    if provider is not None:
        provider.shutdown()
    return elapsed / n * 1e6


def main(argv: list[str]) -> None:
    n = int(argv[0]) if argv else 20_000
    rounds = int(argv[1]) if len(argv) > 1 else 5
    untraced: list[float] = []
    traced: list[float] = []
    for _ in range(rounds):
        untraced.append(asyncio.run(_round(n, False)))
        traced.append(asyncio.run(_round(n, True)))
    off, on = statistics.median(untraced), statistics.median(traced)
    print(f"{n} timers x {rounds} rounds, median us/timer (schedule + fire, in memory)")
    print(f"untraced {off:.2f}  traced {on:.2f}  tracing costs {on - off:.2f} us/timer")


if __name__ == "__main__":
    main(sys.argv[1:])
