"""Prometheus metrics for an engine, through ``prometheus_client`` (the ``metrics`` extra).

    from prometheus_client import start_http_server
    from wheel_engine.metrics import instrument

    engine = Engine("timers.db")
    metrics = instrument(engine)          # registers with prometheus_client's default registry

    @engine.handler("orders.cancel")
    @metrics.timed                        # optional: a lateness and duration histogram per handler
    async def cancel_order(firing): ...

    start_http_server(9100)

What is exported (``wheel_engine_`` prefix):

- gauges ``timers{state="pending|running|dead"}``, ``unhandled_timers`` (timers whose handler is
  not registered), ``journal_records`` (records since the last compaction),
  ``lateness_seconds{quantile="0.5|0.99"}`` and ``lateness_max_seconds`` over recent firings;
- counters ``fired_total``, ``succeeded_total``, ``retried_total``, ``dead_total``,
  ``canceled_total``, ``redriven_total`` (since the engine started);
- histograms ``journal_commit_batch_size`` and ``journal_commit_seconds`` (every group commit),
  and, for handlers wrapped with :meth:`EngineMetrics.timed`, ``firing_lateness_seconds`` and
  ``handler_seconds`` labelled by handler.

The gauges and counters are read from :meth:`Engine.stats` when Prometheus scrapes; nothing is
done per timer unless a handler is wrapped with ``timed``.
"""

from __future__ import annotations

import functools
import inspect
import logging
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

try:
    from prometheus_client import REGISTRY, CollectorRegistry, Histogram
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ImportError(
        "wheel_engine.metrics needs prometheus_client, which is an optional extra: "
        "pip install 'wheel-engine[metrics]'"
    ) from exc

if TYPE_CHECKING:
    from wheel_engine import Engine, Firing

__all__ = ["COMMIT_BATCH_BUCKETS", "LATENESS_BUCKETS", "EngineMetrics", "instrument"]

logger = logging.getLogger(__name__)

#: Seconds late: from well inside one tick to a minute (a restart after an outage).
LATENESS_BUCKETS = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
)
#: Records per group commit.
COMMIT_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096)
#: Seconds per group commit (an fsync on a laptop SSD is ~0.1-5 ms, on a cloud disk more).
COMMIT_SECONDS_BUCKETS = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
)

H = TypeVar("H", bound=Callable[..., Any])

_COUNTERS = (
    ("fired", "fired", "Timer attempts started."),
    ("succeeded", "succeeded", "Attempts whose handler returned normally."),
    ("retried", "retried", "Failed attempts that were scheduled to run again."),
    ("dead", "dead_total", "Timers that became DEAD (attempts, deadline or PermanentError)."),
    ("canceled", "canceled", "Timers cancelled before they ran."),
    ("redriven", "redriven", "DEAD timers put back to PENDING."),
)


class _StatsCollector:
    """Reads ``engine.stats()`` at scrape time."""

    def __init__(self, owner: EngineMetrics) -> None:
        self._owner = owner

    def describe(self) -> list[Metric]:
        # Names only (used by the registry to detect clashes); no stats() call at registration.
        return list(self._families({}))

    def collect(self) -> Iterator[Metric]:
        engine = self._owner.engine
        self._owner.attach_journal()
        try:
            stats = engine.stats()
        except Exception:  # a scrape must not take the process down
            logger.warning("engine.stats() failed during a metrics scrape", exc_info=True)
            return iter(())
        return self._families(stats)

    def _families(self, stats: dict[str, Any]) -> Iterator[Metric]:
        p = self._owner.prefix
        timers = GaugeMetricFamily(f"{p}_timers", "Timers by state, now.", labels=["state"])
        for state in ("pending", "running", "dead"):
            timers.add_metric([state], float(stats.get(state, 0)))
        yield timers
        yield GaugeMetricFamily(
            f"{p}_unhandled_timers",
            "Timers kept because no handler with their name is registered.",
            value=float(stats.get("unhandled", 0)),
        )
        yield GaugeMetricFamily(
            f"{p}_journal_records",
            "Journal records appended since the last compaction.",
            value=float(stats.get("journal_records", 0) or 0),
        )
        lateness = GaugeMetricFamily(
            f"{p}_lateness_seconds",
            "How late recent firings started, by quantile (seconds).",
            labels=["quantile"],
        )
        lateness.add_metric(["0.5"], float(stats.get("lag_p50", 0.0) or 0.0))
        lateness.add_metric(["0.99"], float(stats.get("lag_p99", 0.0) or 0.0))
        yield lateness
        yield GaugeMetricFamily(
            f"{p}_lateness_max_seconds",
            "The latest firing ever started, since the engine started (seconds).",
            value=float(stats.get("lag_max", 0.0) or 0.0),
        )
        for name, key, doc in _COUNTERS:
            yield CounterMetricFamily(f"{p}_{name}", doc, value=float(stats.get(key, 0) or 0))


class EngineMetrics:
    """The metrics of one engine. Made by :func:`instrument`; ``unregister()`` undoes it."""

    def __init__(
        self, engine: Engine, registry: CollectorRegistry, prefix: str = "wheel_engine"
    ) -> None:
        self.engine = engine
        self.registry = registry
        self.prefix = prefix
        self._journal: Any = None
        self._previous_hook: Callable[[int, float], None] | None = None
        self.commit_batch = Histogram(
            f"{prefix}_journal_commit_batch_size",
            "Records written per journal group commit.",
            buckets=COMMIT_BATCH_BUCKETS,
            registry=registry,
        )
        self.commit_seconds = Histogram(
            f"{prefix}_journal_commit_seconds",
            "Seconds per journal group commit, fsync included.",
            buckets=COMMIT_SECONDS_BUCKETS,
            registry=registry,
        )
        self.firing_lateness = Histogram(
            f"{prefix}_firing_lateness_seconds",
            "Seconds from due to the start of an attempt (handlers wrapped with timed).",
            ["handler"],
            buckets=LATENESS_BUCKETS,
            registry=registry,
        )
        self.handler_seconds = Histogram(
            f"{prefix}_handler_seconds",
            "Seconds an attempt's handler ran (handlers wrapped with timed).",
            ["handler", "outcome"],
            buckets=LATENESS_BUCKETS,
            registry=registry,
        )
        self.collector = _StatsCollector(self)
        registry.register(self.collector)
        self.attach_journal()

    # --- the journal's commit hook --------------------------------------------------------------
    def attach_journal(self) -> None:
        """Hook into ``engine.journal.on_commit`` (again, if the engine opened a new journal).

        ``instrument`` calls it, and so does every scrape, so an engine instrumented before
        ``start()`` is hooked by the first scrape after it. An existing hook is kept and called.
        """
        journal = getattr(self.engine, "journal", None)
        if journal is None or journal is self._journal:
            return
        previous = getattr(journal, "on_commit", None)
        self._previous_hook = previous
        journal.on_commit = self._on_commit
        self._journal = journal

    def _on_commit(self, batch_size: int, seconds: float) -> None:
        self.commit_batch.observe(batch_size)
        self.commit_seconds.observe(seconds)
        if self._previous_hook is not None:
            self._previous_hook(batch_size, seconds)

    # --- per-handler histograms -------------------------------------------------------------
    def observe(self, firing: Firing) -> None:
        """Record one firing's lateness (``fired_at - due``)."""
        self.firing_lateness.labels(firing.handler).observe(max(0.0, firing.fired_at - firing.due))

    def timed(self, fn: H) -> H:
        """Wrap a handler: its lateness and run time go to the per-handler histograms."""
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def async_wrapper(firing: Firing) -> Any:
                self.observe(firing)
                started = time.perf_counter()
                outcome = "error"
                try:
                    result = await fn(firing)
                    outcome = "ok"
                    return result
                finally:
                    self.handler_seconds.labels(firing.handler, outcome).observe(
                        time.perf_counter() - started
                    )

            return async_wrapper  # type: ignore[return-value]

        @functools.wraps(fn)
        def wrapper(firing: Firing) -> Any:
            self.observe(firing)
            started = time.perf_counter()
            outcome = "error"
            try:
                result = fn(firing)
                if inspect.isawaitable(result):
                    raise TypeError("timed: a plain function returned an awaitable")
                outcome = "ok"
                return result
            finally:
                self.handler_seconds.labels(firing.handler, outcome).observe(
                    time.perf_counter() - started
                )

        return wrapper  # type: ignore[return-value]

    def unregister(self) -> None:
        """Remove every metric from the registry and unhook the journal."""
        for collector in (
            self.collector,
            self.commit_batch,
            self.commit_seconds,
            self.firing_lateness,
            self.handler_seconds,
        ):
            self.registry.unregister(collector)
        if self._journal is not None and self._journal.on_commit == self._on_commit:
            self._journal.on_commit = self._previous_hook
        self._journal = None


def instrument(
    engine: Engine,
    registry: CollectorRegistry | None = None,
    *,
    prefix: str = "wheel_engine",
) -> EngineMetrics:
    """Export ``engine``'s metrics to ``registry`` (default: prometheus_client's global one).

    One engine per registry and prefix: a second ``instrument`` with the same names raises
    ``ValueError`` (duplicated timeseries); give it another ``registry`` or ``prefix``.
    """
    return EngineMetrics(engine, REGISTRY if registry is None else registry, prefix)
