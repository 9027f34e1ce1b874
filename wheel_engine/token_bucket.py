"""A token bucket: at most ``burst + rate * T`` starts in any interval of length T.

A limited handler's gate (:mod:`wheel_engine.limits`) holds one per ``rate=``. The clock is the
engine's (the wall clock, or a test's virtual one); nothing here is thread-safe, as everything
runs on the loop thread.
"""

from __future__ import annotations

import math
from typing import Final

__all__ = ["TokenBucket"]

#: Slack on a token count, in seconds of refill: epoch seconds are floats with a resolution of
#: about 0.2 us, so a refill armed for exactly one token can read 0.999999 tokens when it runs.
_SLACK_SECONDS: Final = 1e-6


class TokenBucket:
    """``burst`` tokens, refilled at ``rate`` per second of the wall clock; one per start.

    Starts per interval of length T are at most ``burst + rate * T``. A wall clock set back
    restarts the refill from the new reading (tokens are never taken away, never added for the
    jump)."""

    __slots__ = ("burst", "rate", "slack", "stamp", "tokens")

    def __init__(self, rate: float, burst: int, now: float) -> None:
        self.rate = rate
        self.burst = burst
        self.tokens = float(burst)
        self.stamp = now
        self.slack = min(0.5, rate * _SLACK_SECONDS)  # tokens a time's rounding may hide

    def level(self, now: float) -> float:
        """The tokens available at ``now`` (refilled up to it)."""
        if now > self.stamp:
            self.tokens = min(float(self.burst), self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        return self.tokens

    def can_take(self, now: float) -> bool:
        return self.level(now) >= 1.0 - self.slack

    def take(self, now: float) -> None:
        """One token (the caller checked :meth:`can_take`)."""
        self.tokens = max(0.0, self.level(now) - 1.0)

    def whole(self, now: float) -> int:
        """Whole tokens available at ``now``."""
        return math.floor(self.level(now) + self.slack)

    def ready_at(self, count: float) -> float:
        """The wall time at which ``count`` tokens (at most ``burst``) are available."""
        wanted = min(float(self.burst), count)
        return self.stamp + max(0.0, wanted - self.tokens) / self.rate
