"""Retry policy: a cap on attempts, exponential backoff with full jitter, and a total deadline."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How a failed attempt is retried.

    Attempt ``n`` (1-based) that fails is followed, after ``delay(n)``, by attempt ``n + 1``,
    unless ``n == max_attempts`` or the retry would start after ``deadline`` seconds counted
    from the first attempt: then the timer is DEAD.

    The delay before attempt ``n + 1`` is ``min(max_delay, initial * multiplier ** (n - 1))``;
    with ``jitter`` it is drawn uniformly from ``[0, that]`` ("full jitter"), which spreads a
    burst of failures instead of retrying them in lock step.
    """

    max_attempts: int = 5
    initial: float = 1.0
    multiplier: float = 2.0
    max_delay: float = 300.0
    jitter: bool = True
    deadline: float | None = None  #: seconds from the first attempt; None: attempts only
    rng: random.Random = field(default_factory=random.Random, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        for name in ("initial", "multiplier", "max_delay"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number >= 0, not {value!r}")
        if self.multiplier < 1:
            raise ValueError("multiplier must be >= 1")
        if self.deadline is not None and (not math.isfinite(self.deadline) or self.deadline < 0):
            raise ValueError(f"deadline must be a finite number >= 0, not {self.deadline!r}")

    def backoff(self, attempt: int) -> float:
        """The upper bound of the delay after failed attempt ``attempt`` (before jitter)."""
        exponent = min(attempt - 1, 1000)  # keeps ** from overflowing; max_delay caps it anyway
        try:
            raw = self.initial * self.multiplier**exponent
        except OverflowError:
            raw = math.inf
        return min(self.max_delay, raw)

    def next_delay(self, attempt: int, *, first_attempt_at: float, now: float) -> float | None:
        """Seconds until the next attempt after ``attempt`` failed at ``now``, or None: give up."""
        if attempt >= self.max_attempts:
            return None
        bound = self.backoff(attempt)
        delay = self.rng.uniform(0.0, bound) if self.jitter else bound
        if self.deadline is not None and now + delay - first_attempt_at > self.deadline:
            return None
        return delay
