"""The token bucket (``wheel_engine.limits.TokenBucket``) against an exact reference model."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st

from wheel_engine.limits import TokenBucket


class ReferenceBucket:
    """The same bucket in exact rational arithmetic."""

    def __init__(self, rate: int, burst: int) -> None:
        self.rate = Fraction(rate)
        self.burst = Fraction(burst)
        self.tokens = Fraction(burst)

    def elapse(self, seconds: Fraction) -> None:
        self.tokens = min(self.burst, self.tokens + seconds * self.rate)

    def take(self) -> bool:
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False


@given(
    rate=st.integers(1, 100),
    burst=st.integers(1, 50),
    steps=st.lists(st.integers(0, 2000), min_size=1, max_size=200),  # milliseconds apart
)
def test_the_bucket_takes_what_the_model_takes(rate: int, burst: int, steps: list[int]) -> None:
    bucket = TokenBucket(float(rate), burst, 0.0)
    model = ReferenceBucket(rate, burst)
    now_ms = 0
    taken: list[int] = []
    for step in steps:
        now_ms += step
        model.elapse(Fraction(step, 1000))
        now = now_ms / 1000
        expected = model.take()
        if bucket.can_take(now):
            bucket.take(now)
            got = True
        else:
            got = False
        assert got == expected, (now_ms, model.tokens, bucket.tokens)
        if got:
            taken.append(now_ms)
    # No window of T seconds holds more than burst + rate * T starts.
    for i, start in enumerate(taken):
        for j in range(i, len(taken)):
            window = Fraction(taken[j] - start, 1000)
            assert j - i + 1 <= burst + rate * window


@given(rate=st.integers(1, 10_000), burst=st.integers(1, 100), spent=st.integers(0, 100))
def test_a_refill_wake_finds_the_token_it_was_armed_for(rate: int, burst: int, spent: int) -> None:
    start = 1_767_225_600.0  # an epoch reading: its floats are 0.2 us apart
    bucket = TokenBucket(float(rate), burst, start)
    for _ in range(min(spent, burst)):
        bucket.take(start)
    if bucket.can_take(start):
        return
    assert bucket.can_take(bucket.ready_at(1.0))
