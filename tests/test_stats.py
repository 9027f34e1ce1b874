"""wheel_engine.stats: the one percentile (nearest rank), for stats(), the demo and the bench."""

from __future__ import annotations

import math
import random

import pytest

from bench.compare import lateness as bench_lateness
from wheel_engine.demo import verdict
from wheel_engine.stats import Counters, percentiles


def test_nearest_rank() -> None:
    ten = [float(n) for n in range(10, 0, -1)]  # unsorted on purpose
    assert percentiles(ten, (0.0, 0.1, 0.5, 0.9, 0.99, 1.0)) == [1, 1, 5, 9, 10, 10]
    assert percentiles([1.0, 2.0, 3.0, 4.0], (0.5, 0.75, 0.76)) == [2, 3, 4]
    assert percentiles([7.0], (0.0, 0.5, 1.0)) == [7, 7, 7]
    assert all(math.isnan(p) for p in percentiles([], (0.5, 0.99)))
    with pytest.raises(ValueError, match="between 0 and 1"):
        percentiles([1.0], (99,))


def test_a_result_is_one_of_the_values_with_at_least_q_at_or_below_it() -> None:
    rng = random.Random(5)
    for _ in range(200):
        values = [rng.uniform(-1, 1) for _ in range(rng.randint(1, 50))]
        q = rng.random()
        (p,) = percentiles(values, (q,))
        assert p in values
        at_or_below = sum(1 for v in values if v <= p)
        assert at_or_below >= q * len(values)
        assert sum(1 for v in values if v < p) < q * len(values) or p == min(values)


def test_stats_demo_and_bench_agree() -> None:
    """They had three definitions: p99 of 1..10 was 9 in stats(), p50 of 1..4 was 3 in the bench."""
    counters = Counters()
    counters.lags.extend(float(n) for n in range(1, 11))
    assert counters.lag_percentiles() == (5.0, 10.0)
    assert Counters().lag_percentiles() == (0.0, 0.0)  # stats() before any firing
    summary = bench_lateness.summarise([4.0, 1.0, 3.0, 2.0], 0.0, 1.0)
    assert (summary["p50"], summary["p99"], summary["max"]) == (2.0, 4.0, 4.0)
    assert dict(summary["cdf"])[0.25] == 1.0
    assert verdict.percentiles is percentiles  # the demo's report uses the same function
