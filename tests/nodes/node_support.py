"""Helpers for the engine-on-PostgreSQL tests: engines with short leases, waiting on conditions."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import psycopg

from wheel_engine import Engine

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


def sql(url: str, statement: str, params: Any = None) -> list[tuple[Any, ...]]:
    """Run one statement on a connection of its own; its rows (if it returns any)."""
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(statement, params)
        return cur.fetchall() if cur.description is not None else []


def db_now(url: str) -> float:
    return float(sql(url, "SELECT extract(epoch FROM now())::float8")[0][0])
