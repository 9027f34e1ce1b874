"""Counters and a lateness reservoir for ``Engine.stats()``: cheap on the hot path."""

from __future__ import annotations

from collections import deque
from typing import Any

LAG_SAMPLES = 10_000  # recent firings kept for the lateness percentiles


class Counters:
    """Monotonic counters since start, plus the lateness of the most recent firings."""

    __slots__ = ("canceled", "dead", "fired", "lag_max", "lags", "redriven", "retried", "succeeded")

    def __init__(self) -> None:
        self.fired = 0
        self.succeeded = 0
        self.retried = 0
        self.canceled = 0
        self.dead = 0
        self.redriven = 0
        self.lag_max = 0.0
        self.lags: deque[float] = deque(maxlen=LAG_SAMPLES)

    def lag_percentiles(self) -> tuple[float, float]:
        """(p50, p99) of the recent lateness samples, 0.0 when nothing fired yet."""
        if not self.lags:
            return 0.0, 0.0
        ordered = sorted(self.lags)
        last = len(ordered) - 1
        return ordered[last * 50 // 100], ordered[last * 99 // 100]

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
