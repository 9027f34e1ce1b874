"""Prometheus metrics for an engine, through ``prometheus_client`` (the ``metrics`` extra).

    from prometheus_client import start_http_server
    from wheel_engine.metrics import instrument

    engine = Engine("timers.db")
    metrics = instrument(engine)          # registers with prometheus_client's default registry
    start_http_server(9100)

What is exported (``wheel_engine_`` prefix):

- histograms ``firing_lateness_seconds{handler}`` (seconds from due to the start of each attempt)
  and ``handler_seconds{handler,outcome}`` (how long each attempt's handler ran; ``outcome`` is
  ``succeeded``, ``retry``, ``dead`` or ``canceled``), fed by the engine's events
  (:mod:`wheel_engine.events`); histograms, so that they sum across processes and any quantile
  over any window is computed by Prometheus (``histogram_quantile``);
- histograms ``journal_commit_batch_size`` and ``journal_commit_seconds`` (every group commit);
- gauges ``timers{state="pending|running|dead"}``, ``unhandled_timers`` (timers whose handler is
  not registered), ``journal_records`` (records since the last compaction) and
  ``lateness_max_seconds`` (the latest firing since the engine started);
- counters ``fired_total``, ``succeeded_total``, ``retried_total``, ``dead_total``,
  ``canceled_total``, ``redriven_total`` (since the engine started);
- per handler with ``concurrency`` or ``rate`` (:mod:`wheel_engine.limits`): gauges
  ``handler_running{handler}`` and ``handler_waiting{handler,reason="slot|token"}``, counter
  ``handler_throttled_total{handler}``.

Gauges and counters are read from :meth:`Engine.stats` when Prometheus scrapes: nothing is done
per timer for them. The per-handler histograms cost one observation per event they count
(``fired`` and the end of each attempt), on the loop, and only when the metrics are enabled.
"""

from __future__ import annotations

import functools
import logging
from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from wheel_engine.extras import install_hint

try:
    from prometheus_client import REGISTRY, CollectorRegistry, Histogram
    from prometheus_client.core import (
        CounterMetricFamily,
        GaugeMetricFamily,
        HistogramMetricFamily,
        Metric,
    )
    from prometheus_client.utils import floatToGoString
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ImportError(
        "wheel_engine.metrics needs prometheus_client, which is an optional extra: "
        + install_hint("metrics")
    ) from exc

from wheel_engine.events import Event, EventKind, Subscriber

if TYPE_CHECKING:
    from wheel_engine import Engine

__all__ = [
    "COMMIT_BATCH_BUCKETS",
    "COMMIT_SECONDS_BUCKETS",
    "HANDLER_SECONDS_BUCKETS",
    "LATENESS_BUCKETS",
    "EngineMetrics",
    "instrument",
]

logger = logging.getLogger(__name__)

#: Seconds late, from well inside one tick to a restart after an outage.
LATENESS_BUCKETS = (
    0.0005,  # half the default tick: an unloaded loop fires here
    0.001,  # one default tick (SPEC guarantee 6: within a tick plus scheduling latency)
    0.0025,  # a few ticks: a busy loop
    0.005,
    0.01,  # 10 ms: a loop lagging behind its callbacks
    0.025,
    0.05,
    0.1,  # 100 ms: a user would notice; max_concurrency saturated or a blocking handler
    0.25,
    0.5,
    1.0,  # 1 s: the example alerting threshold in docs/guide/operations.md
    2.5,
    5.0,
    10.0,  # a retry's or a restart's backlog draining
    30.0,
    60.0,  # a minute: overdue timers found at recovery after an outage
)
#: Seconds a handler ran, from an inline no-op to a long call to a slow downstream.
HANDLER_SECONDS_BUCKETS = (
    0.0001,  # 100 us: an inline handler or one that only enqueues work
    0.001,  # 1 ms: a cache or local database write
    0.005,
    0.01,  # 10 ms: a fast network call
    0.025,
    0.05,
    0.1,  # 100 ms: a typical HTTP call to another service
    0.25,
    0.5,
    1.0,  # 1 s: a slow downstream
    2.5,
    5.0,  # the order of a typical handler timeout
    10.0,
    30.0,  # a call about to hit a client-side timeout
    60.0,
    300.0,  # five minutes: batch-like work, or a stuck call only its timeout ends
)
#: Records per group commit: powers of two, as batches grow by doubling under load.
COMMIT_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096)
#: Seconds per group commit (an fsync on a laptop SSD is ~0.1-5 ms, on a cloud disk more).
COMMIT_SECONDS_BUCKETS = (
    0.0001,  # 100 us: durability="normal", no fsync
    0.00025,
    0.0005,
    0.001,  # 1 ms: an fsync on a fast local SSD
    0.0025,
    0.005,
    0.01,  # 10 ms: a network disk
    0.025,
    0.05,  # 50 ms: the alerting threshold in docs/guide/operations.md
    0.1,
    0.25,
    0.5,
    1.0,  # a second: the disk is failing or saturated
)

#: How prometheus_client writes a bucket's ``le`` (typed here: the library's function is not).
_le_label: Callable[[float], str] = floatToGoString

#: Where events come from: ``Engine.on_event``, or an ``EventBus.subscribe`` in tests.
Subscribe = Callable[[Subscriber], Callable[[], None]]

#: The events that end an attempt that ran, with the ``outcome`` label they get.
_ATTEMPT_ENDS = frozenset(
    {EventKind.SUCCEEDED, EventKind.RETRY, EventKind.DEAD, EventKind.CANCELED}
)

_COUNTERS = (
    ("fired", "fired", "Timer attempts started."),
    ("succeeded", "succeeded", "Attempts whose handler returned normally."),
    ("retried", "retried", "Failed attempts that were scheduled to run again."),
    ("dead", "dead_total", "Timers that became DEAD (attempts, deadline or PermanentError)."),
    ("canceled", "canceled", "Timers cancelled: pending ones, and running attempts that stopped."),
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
        yield GaugeMetricFamily(
            f"{p}_lateness_max_seconds",
            "The latest firing ever started, since the engine started (seconds).",
            value=float(stats.get("lag_max", 0.0) or 0.0),
        )
        for name, key, doc in _COUNTERS:
            yield CounterMetricFamily(f"{p}_{name}", doc, value=float(stats.get(key, 0) or 0))
        yield from _limit_families(p, stats.get("limits") or {})


def _limit_families(p: str, limits: dict[str, dict[str, Any]]) -> Iterator[Metric]:
    """Per limited handler (``concurrency``/``rate``): running, waiting and throttled."""
    running = GaugeMetricFamily(
        f"{p}_handler_running", "Attempts of a limited handler running now.", labels=["handler"]
    )
    waiting = GaugeMetricFamily(
        f"{p}_handler_waiting",
        "Due timers of a limited handler waiting, uncharged, for a slot, a token or its row.",
        labels=["handler", "reason"],
    )
    throttled = CounterMetricFamily(
        f"{p}_handler_throttled",
        "Times a due timer of a limited handler had to wait, since the engine started.",
        labels=["handler"],
    )
    for handler, figures in limits.items():
        running.add_metric([handler], float(figures["running"]))
        waiting.add_metric([handler, "slot"], float(figures["waiting_slot"]))
        waiting.add_metric([handler, "token"], float(figures["waiting_token"]))
        waiting.add_metric([handler, "row"], float(figures["waiting_row"]))  # cluster scope
        throttled.add_metric([handler], float(figures["throttled"]))
    yield running
    yield waiting
    yield throttled


class _LoopHistogram:
    """A histogram by label values, observed on the loop thread without a lock, exported when
    Prometheus scrapes (a collector, like ``_StatsCollector``).

    Why not ``prometheus_client.Histogram``: its ``observe`` takes a lock and scans the buckets
    in Python, where this one does a dict lookup, a bisect and two additions, on a firing that
    itself costs little more. Guaranteed: each scrape's
    buckets are consistent (the count is the +Inf bucket); not guaranteed: its ``_sum`` may
    include an observation made while the scrape was reading the buckets, or miss it.
    """

    def __init__(
        self, name: str, doc: str, labelnames: Sequence[str], buckets: Sequence[float]
    ) -> None:
        self.name = name
        self.doc = doc
        self.labelnames = list(labelnames)
        self._bounds = tuple(float(bound) for bound in buckets)
        self._les = [_le_label(bound) for bound in self._bounds]
        #: label values -> one count per bucket (the last one: above every bound), then the sum
        self._series: dict[tuple[str, ...], list[float]] = {}

    def observe(self, labels: tuple[str, ...], value: float) -> None:
        series = self._series.get(labels)
        if series is None:
            series = self._series[labels] = [0.0] * (len(self._bounds) + 2)
        series[bisect_left(self._bounds, value)] += 1  # the first bucket whose le >= value
        series[-1] += value

    def describe(self) -> list[Metric]:
        return [HistogramMetricFamily(self.name, self.doc, labels=self.labelnames)]

    def collect(self) -> Iterator[Metric]:
        family = HistogramMetricFamily(self.name, self.doc, labels=self.labelnames)
        for labels, series in list(self._series.items()):  # one C call: atomic under the GIL
            counts = list(series)
            cumulative = 0.0
            buckets: list[tuple[str, float]] = []
            for le, count in zip([*self._les, "+Inf"], counts[:-1], strict=True):
                cumulative += count
                buckets.append((le, cumulative))
            family.add_metric(list(labels), buckets, counts[-1])
        yield family


class EngineMetrics:
    """The metrics of one engine. Made by :func:`instrument`; ``unregister()`` undoes it.

    ``subscribe`` is where events come from (default: ``engine.on_event``); tests pass an
    :class:`~wheel_engine.events.EventBus`'s ``subscribe`` to drive the histograms directly.
    """

    def __init__(
        self,
        engine: Engine,
        registry: CollectorRegistry,
        prefix: str = "wheel_engine",
        *,
        subscribe: Subscribe | None = None,
    ) -> None:
        self.engine = engine
        self.registry = registry
        self.prefix = prefix
        self._journal: Any = None
        self._previous_hook: Callable[[int, float], None] | None = None
        self._unhook: Callable[[], None] = _nothing  # gives the journal its hook back
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
        self.firing_lateness = _LoopHistogram(
            f"{prefix}_firing_lateness_seconds",
            "Seconds from a timer's due time to the start of its attempt.",
            ["handler"],
            LATENESS_BUCKETS,
        )
        self.handler_seconds = _LoopHistogram(
            f"{prefix}_handler_seconds",
            "Seconds an attempt's handler ran, by how the attempt ended.",
            ["handler", "outcome"],
            HANDLER_SECONDS_BUCKETS,
        )
        registry.register(self.firing_lateness)
        registry.register(self.handler_seconds)
        self.collector = _StatsCollector(self)
        registry.register(self.collector)
        self.attach_journal()
        if subscribe is None:
            subscribe = engine.on_event
        self._unsubscribe: Callable[[], None] | None = subscribe(self.record)

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
        self._unhook = functools.partial(_give_hook_back, journal, self._on_commit, previous)

    def _on_commit(self, batch_size: int, seconds: float) -> None:
        self.commit_batch.observe(batch_size)
        self.commit_seconds.observe(seconds)
        if self._previous_hook is not None:
            self._previous_hook(batch_size, seconds)

    # --- the per-handler histograms, from events ------------------------------------------------
    def record(self, event: Event) -> None:
        """The event callback: a firing's lateness, or the run time of an attempt that ended."""
        kind = event.kind
        if kind is EventKind.FIRED:
            lateness = event.lateness or 0.0
            # never early: below 0 is the float rounding of a tick
            self.firing_lateness.observe((event.handler,), lateness if lateness > 0.0 else 0.0)
        elif event.duration is not None and kind in _ATTEMPT_ENDS:
            duration = event.duration  # below 0 only if the wall clock was set back meanwhile
            self.handler_seconds.observe(
                (event.handler, kind.value), duration if duration > 0.0 else 0.0
            )

    def unregister(self) -> None:
        """Remove every metric from the registry, unsubscribe and unhook the journal."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        for collector in (
            self.collector,
            self.commit_batch,
            self.commit_seconds,
            self.firing_lateness,
            self.handler_seconds,
        ):
            self.registry.unregister(collector)
        self._unhook()
        self._unhook = _nothing
        self._journal = None


def instrument(
    engine: Engine,
    registry: CollectorRegistry | None = None,
    *,
    prefix: str = "wheel_engine",
) -> EngineMetrics:
    """Export ``engine``'s metrics to ``registry`` (default: prometheus_client's global one).

    Call it before or after ``start()``: the histograms count from the first event after it.
    One engine per registry and prefix: a second ``instrument`` with the same names raises
    ``ValueError`` (duplicated timeseries); give it another ``registry`` or ``prefix``.
    """
    return EngineMetrics(engine, REGISTRY if registry is None else registry, prefix)


def _nothing() -> None:
    return None


def _give_hook_back(
    journal: Any, hook: Callable[[int, float], None], previous: Callable[[int, float], None] | None
) -> None:
    """Unhook ``journal``'s commits: ``previous`` again, unless another hook took over."""
    if journal.on_commit == hook:
        journal.on_commit = previous
