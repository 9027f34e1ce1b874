"""Counters and a lateness reservoir for ``Engine.stats()`` (assembled in
:mod:`wheel_engine.engine_stats`), and the project's one percentile.

:func:`percentiles` is the only definition of a percentile in the project: ``stats()``'s
``lag_p50``/``lag_p99``, the demo's report and the benchmarks' lateness figure all use it, so
their numbers mean the same thing.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any

__all__ = ["LAG_SAMPLES", "Counters", "percentiles"]

LAG_SAMPLES = 10_000  # recent firings kept for the lateness percentiles


def percentiles(values: Iterable[float], qs: Sequence[float]) -> list[float]:
    """The ``q`` quantile of ``values`` for each ``q`` in ``qs`` (0 <= q <= 1), by nearest rank.

    Nearest rank: the smallest value such that at least a fraction ``q`` of the values are less
    than or equal to it, so a result is always one of the values (never interpolated), p100 is
    the maximum and p0 the minimum. ``values`` are sorted once for all of ``qs`` (already sorted
    ones in linear time). NaN for every ``q`` when there are no values. NaN values are not
    meaningful here; callers leave them out.
    """
    ordered = sorted(values)
    count = len(ordered)
    results: list[float] = []
    for q in qs:
        if not 0.0 <= q <= 1.0:
            raise ValueError(f"a quantile is between 0 and 1, not {q!r}")
        if not count:
            results.append(math.nan)
            continue
        rank = math.ceil(q * count)  # 1-based: how many values are <= the answer
        results.append(ordered[min(count, max(1, rank)) - 1])
    return results


class Counters:
    """Monotonic counters since start, plus the lateness of the most recent firings."""

    __slots__ = (
        "_sample",
        "canceled",
        "dead",
        "fired",
        "lag_max",
        "lags",
        "redriven",
        "retried",
        "succeeded",
    )

    def __init__(self) -> None:
        self.fired = 0
        self.succeeded = 0
        self.retried = 0
        self.canceled = 0
        self.dead = 0
        self.redriven = 0
        self.lag_max = 0.0
        self.lags: deque[float] = deque(maxlen=LAG_SAMPLES)
        # The bound method, kept: compiled code calls it without looking ``append`` up each time.
        self._sample: Callable[[float], None] = self.lags.append

    def count_firing(self, lag: float) -> None:
        """An attempt started ``lag`` seconds after its due time (the fire path, per timer)."""
        self.fired += 1
        self._sample(lag)
        if lag > self.lag_max:
            self.lag_max = lag

    def lag_percentiles(self) -> tuple[float, float]:
        """(p50, p99) of the recent lateness samples, 0.0 when nothing fired yet."""
        if not self.lags:
            return 0.0, 0.0
        p50, p99 = percentiles(self.lags, (0.50, 0.99))
        return p50, p99

    def as_dict(self) -> dict[str, Any]:
        """The counters and lateness figures, under ``Engine.stats()``'s names."""
        p50, p99 = self.lag_percentiles()
        return {
            "fired": self.fired,
            "succeeded": self.succeeded,
            "retried": self.retried,
            "canceled": self.canceled,
            "dead_total": self.dead,
            "redriven": self.redriven,
            "lag_p50": p50,
            "lag_p99": p99,
            "lag_max": self.lag_max,
        }
