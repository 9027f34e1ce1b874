"""``limit_scope="cluster"`` never makes another handler wait (issue 26: "one handler's backlog
never delays another handler's timers"), on a real PostgreSQL server.

A claim of a cluster-limited handler takes its row in ``wheel_limits``; here a second
connection holds that row, as another node's claim in progress would (for seconds, as a node
paused or cut off mid-claim could). The node's claim must not wait for it: the limited timers
wait in their gate, PENDING and uncharged, and the unlimited handler's timers, claimed in the
same start groups, start on time. Before, the limited claim queued on the row's lock and the
whole start group (and every inline group after it) waited with it.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from pg_cluster import psycopg, sql

from wheel_engine import Engine, Firing

pytestmark = pytest.mark.slow

#: Seconds the second connection holds the row: far beyond any bound asserted below.
HELD = 3.0
#: How late an unlimited timer may start while the row is held (a loaded CI machine's claims).
LATE_BOUND = 0.5


async def _until(condition: Any, patience: float) -> None:
    deadline = time.monotonic() + patience
    while not condition():
        assert time.monotonic() < deadline, f"condition not met within {patience} s"
        await asyncio.sleep(0.02)


def _limited_rows(url: str) -> list[tuple[Any, ...]]:
    return sql(url, "SELECT state, attempts FROM wheel_timers WHERE handler = 'a' ORDER BY key")


async def test_an_unlimited_handler_starts_on_time_while_another_claim_holds_the_row(
    pg_url: str,
) -> None:
    a_starts: list[float] = []
    b_late: list[float] = []
    e = Engine(pg_url, node="n1", lease=1.5, horizon=60.0)
    e.register("a", lambda f: a_starts.append(time.time()), rate=1000.0, limit_scope="cluster")

    def b(firing: Firing) -> None:
        b_late.append(time.time() - firing.due)

    e.register("b", b)
    async with e:
        await _until(lambda: len(e.stats()["partitions"]) == 64, patience=15)
        holder = await psycopg.AsyncConnection.connect(pg_url)  # a transaction until rollback
        try:
            await holder.execute("SELECT 1 FROM wheel_limits WHERE handler = 'a' FOR UPDATE")
            held_at = time.time()
            await e.schedule_many(
                [{"handler": "a", "at": held_at + 0.1, "key": f"a{i:03}"} for i in range(100)]
            )
            await e.schedule_many(
                [{"handler": "b", "at": held_at + 0.2 + i / 10, "key": f"b{i}"} for i in range(10)]
            )
            await _until(lambda: len(b_late) == 10, patience=HELD)
            waiting = await asyncio.to_thread(_limited_rows, pg_url)
            started_while_held = len(a_starts)
            released_at = time.time()
            await holder.rollback()  # the other claim ends: the row is free again
        finally:
            await holder.close()
        await _until(lambda: len(a_starts) == 100, patience=15)
    assert max(b_late) < LATE_BOUND, sorted(b_late)
    # The limited timers waited for the row, PENDING and charged nothing (guarantee 5) ...
    assert started_while_held == 0
    assert waiting == [(0, 0)] * 100
    # ... and started once it was free, each once.
    assert min(a_starts) >= released_at
    assert await asyncio.to_thread(_limited_rows, pg_url) == [(2, 1)] * 100
