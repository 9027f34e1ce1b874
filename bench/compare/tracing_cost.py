"""What tracing costs per timer, untraced and traced in alternating rounds in one process.

    python -m bench.compare.tracing_cost [N] [ROUNDS]            # in memory
    python -m bench.compare.tracing_cost --sqlite [N] [ROUNDS]   # on a SQLite journal

In memory: schedule then fire N timers one by one (plain handler, the virtual clock): two spans
per timer (``schedule``, ``fire``), the stored context, the general fire path. On SQLite: one
``schedule_many`` of N timers into a new journal (one span, a context stored with each timer),
timed to its return (committed), and the bytes of the schedule records it wrote. Traced means an
SDK ``TracerProvider`` whose spans go to an exporter that drops them (what the engine pays, not
what an exporter pays). Prints the median of the rounds.
"""

from __future__ import annotations

import asyncio
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
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


async def _sqlite_round(n: int, traced: bool) -> tuple[float, float]:
    """Milliseconds of one committed ``schedule_many`` of ``n`` timers, and the mean bytes of
    the schedule records it wrote."""
    provider = _provider(traced)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "j.db"
        engine = Engine(str(path), clock=VirtualClock())
        engine.register("h", lambda firing: None)
        requests = [{"handler": "h", "delay": 60.0 + i, "key": f"k{i}"} for i in range(n)]
        async with engine:
            started = time.perf_counter()
            await engine.schedule_many(requests)
            elapsed = time.perf_counter() - started
        with sqlite3.connect(path) as con:
            (size,) = con.execute("SELECT sum(length(body)) FROM records WHERE kind = 1").fetchone()
    if provider is not None:
        provider.shutdown()
    return elapsed * 1e3, size / n


def _sqlite(n: int, rounds: int) -> None:
    results: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    for _ in range(rounds):
        for traced in (False, True):
            results[traced].append(asyncio.run(_sqlite_round(n, traced)))
    (off, off_bytes), (on, on_bytes) = (
        (statistics.median(t for t, _ in results[k]), statistics.median(b for _, b in results[k]))
        for k in (False, True)
    )
    print(f"schedule_many of {n} timers x {rounds} rounds, SQLite, median")
    print(f"untraced {off:.1f} ms ({off_bytes:.1f} bytes/record)")
    print(f"traced   {on:.1f} ms ({on_bytes:.1f} bytes/record)")
    print(f"tracing costs {(on - off) / n * 1e3:.2f} us and {on_bytes - off_bytes:.1f} bytes/timer")


def main(argv: list[str]) -> None:
    sqlite = argv[:1] == ["--sqlite"]
    argv = argv[1:] if sqlite else argv
    n = int(argv[0]) if argv else (10_000 if sqlite else 20_000)
    rounds = int(argv[1]) if len(argv) > 1 else 5
    if sqlite:
        _sqlite(n, rounds)
        return
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
