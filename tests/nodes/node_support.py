"""Helpers for the engine-on-PostgreSQL tests: engines with short leases, waiting on conditions."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from pg_cluster import db_now, sql

from wheel_engine import Engine, Firing

__all__ = [
    "LEASE",
    "Slow",
    "balanced",
    "db_now",
    "engine",
    "key_in",
    "owned",
    "sql",
    "state_of",
    "two_nodes",
    "until",
]

#: Seconds a test lease lasts: short, so that handovers and failovers are quick.
LEASE = 1.5
#: Seconds a test waits for a condition before it fails.
PATIENCE = 15.0


def engine(url: str, node: str, **kw: Any) -> Engine:
    kw.setdefault("lease", LEASE)
    kw.setdefault("horizon", 60.0)
    return Engine(url, node=node, **kw)


async def until(condition: Callable[[], bool], patience: float = PATIENCE) -> None:
    """Wait (polling every 20 ms) until ``condition()`` holds; fail after ``patience`` s."""
    deadline = time.monotonic() + patience
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {patience} s")
        await asyncio.sleep(0.02)


#: The state names by the code the PostgreSQL journal stores.
_STATE_NAMES = ("PENDING", "RUNNING", "SUCCEEDED", "CANCELED", "DEAD")


def state_of(url: str, key: str) -> str | None:
    """``key``'s state in the database (None: no such row)."""
    rows = sql(url, "SELECT state FROM wheel_timers WHERE key = %s", (key,))
    return None if not rows else _STATE_NAMES[rows[0][0]]


def owned(e: Engine) -> list[int]:
    """The partitions ``e`` may fire in now."""
    return list(e.stats()["partitions"])


def key_in(partitions: list[int], prefix: str = "k") -> str:
    """A key whose partition is one of ``partitions`` (of the default 64)."""
    from journal.postgres import partition_of

    return next(
        key
        for key in (f"{prefix}{n}" for n in range(10_000))
        if partition_of(key, 64) in partitions
    )


class Slow:
    """A handler that runs until cancelled: ``started`` once it runs, ``stopped`` the keys
    whose task was cancelled."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.stopped: list[str] = []

    async def __call__(self, firing: Firing) -> None:
        self.started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            self.stopped.append(firing.key)
            raise


def two_nodes(url: str, handler: Any = None) -> tuple[Engine, Engine]:
    """Engines "a" and "b" on ``url``, with ``handler`` (default: one doing nothing) as "h"."""
    a, b = engine(url, "a"), engine(url, "b")
    for e in (a, b):
        e.register("h", handler if handler is not None else lambda firing: None)
    return a, b


async def balanced(a: Engine, b: Engine) -> None:
    """Wait until ``a`` and ``b`` hold 32 partitions each (the fair share of two nodes)."""
    await until(lambda: len(owned(a)) == 32 and len(owned(b)) == 32)
