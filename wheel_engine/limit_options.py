"""A handler's flow-control options (``concurrency``, ``rate``, ``burst``, ``limit_scope``),
checked once at registration.

The runtime side, the gates that hold timers back, is :mod:`wheel_engine.limits`; this module
is only the checked description, so that :mod:`wheel_engine.handlers` can carry it without
depending on the engine's timers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final, TypedDict

__all__ = ["LIMIT_SCOPES", "HandlerLimits", "LimitOptions", "check_limits", "check_scope"]

#: ``"node"``: each engine process enforces the limits on its own starts; ``"cluster"``: every
#: node sharing a PostgreSQL database together (not available on memory or SQLite).
LIMIT_SCOPES: Final = ("node", "cluster")


class LimitOptions(TypedDict, total=False):
    """A registration's flow-control options, as ``Engine.register`` takes them."""

    concurrency: int | None  #: at most this many attempts running at once
    rate: float | None  #: at most this many attempt starts per second...
    burst: int | None  #: ...with a bucket of this many tokens (default ``max(1, rate)``)
    limit_scope: str  #: ``"node"`` (default) or ``"cluster"`` (PostgreSQL)


@dataclass(frozen=True, slots=True)
class HandlerLimits:
    """What a handler allows: at most ``concurrency`` attempts running at once (None: only the
    engine's ``max_concurrency``), at most ``rate`` attempt starts per second with a bucket of
    ``burst`` tokens (both None: no rate limit)."""

    concurrency: int | None
    rate: float | None
    burst: int | None
    scope: str

    def describe(self) -> dict[str, object]:
        """The limits as ``stats()`` and ``wheel-engine status`` show them."""
        return {
            "concurrency": self.concurrency,
            "rate": self.rate,
            "burst": self.burst,
            "scope": self.scope,
        }


def check_limits(
    name: str,
    concurrency: object,
    rate: object,
    burst: object,
    limit_scope: object,
) -> HandlerLimits | None:
    """The checked limits of handler ``name``, or None when it has none.

    Raises ``ValueError`` for any bad value (a wrong type included) before
    anything is registered. Whether ``"cluster"`` is available depends on the store, which the
    engine checks (:meth:`wheel_engine.Engine.register`).
    """
    if limit_scope not in LIMIT_SCOPES:
        raise ValueError(
            f"handler {name!r}: limit_scope must be one of {', '.join(LIMIT_SCOPES)}, "
            f"not {limit_scope!r}"
        )
    if concurrency is not None:
        if isinstance(concurrency, bool) or not isinstance(concurrency, int):
            raise ValueError(f"handler {name!r}: concurrency must be an int, not {concurrency!r}")
        if concurrency < 1:
            raise ValueError(f"handler {name!r}: concurrency must be >= 1, not {concurrency}")
    if rate is not None:
        if isinstance(rate, bool) or not isinstance(rate, int | float):
            raise ValueError(f"handler {name!r}: rate must be a number, not {rate!r}")
        if not (math.isfinite(rate) and rate > 0):
            raise ValueError(
                f"handler {name!r}: rate must be a finite number of starts per second > 0, "
                f"not {rate!r}"
            )
        rate = float(rate)
    if burst is not None:
        if rate is None:
            raise ValueError(f"handler {name!r}: burst needs a rate")
        if isinstance(burst, bool) or not isinstance(burst, int):
            raise ValueError(f"handler {name!r}: burst must be an int, not {burst!r}")
        if burst < 1:
            raise ValueError(f"handler {name!r}: burst must be >= 1, not {burst}")
    elif rate is not None:
        burst = max(1, math.floor(rate))
    if concurrency is None and rate is None:
        if limit_scope != "node":
            raise ValueError(f"handler {name!r}: limit_scope={limit_scope!r} without a limit")
        return None
    return HandlerLimits(concurrency, rate, burst, limit_scope)


def check_scope(name: str, limits: HandlerLimits | None, *, shared: bool) -> None:
    """Whether ``limits``' scope is available on this store (``shared``: PostgreSQL).

    ``limit_scope="cluster"`` holds limits across nodes through a shared database
    (:mod:`wheel_engine.nodes.limited`): in memory or on SQLite there is no cluster, so it is
    refused rather than quietly enforced on the one node."""
    if limits is None or limits.scope != "cluster":
        return
    if not shared:
        raise ValueError(
            f"handler {name!r}: limit_scope='cluster' needs a PostgreSQL journal; in memory or on "
            "SQLite there is one node, use limit_scope='node'"
        )
