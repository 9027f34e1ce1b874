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


def _engine(pg_url: str) -> tuple[Engine, list[float], list[float]]:
    """A node with ``a`` limited across the cluster and ``b`` unlimited, both plain handlers
    (one inline group at a time): A's start times and B's lateness, as they run."""
    a_starts: list[float] = []
    b_late: list[float] = []
    e = Engine(pg_url, node="n1", lease=1.5, horizon=60.0)
    e.register("a", lambda f: a_starts.append(time.time()), rate=1000.0, limit_scope="cluster")

    def b(firing: Firing) -> None:
        b_late.append(time.time() - firing.due)

    e.register("b", b)
    return e, a_starts, b_late


async def test_an_unlimited_handler_starts_on_time_while_another_claim_holds_the_row(
    pg_url: str,
) -> None:
    e, a_starts, b_late = _engine(pg_url)
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


async def test_an_unlimited_timer_does_not_wait_for_a_limited_claim_held_up_in_its_group(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A and B due at the same instant share a start group; A's claim (through its row) is held
    up for seconds on its way to the database, as a slow link or a loaded server would hold its
    round trip. B's part commits apart and starts on time; before, the group was answered once
    both claims were, and every group of plain handlers after it waited too (one inline group
    at a time)."""
    e, a_starts, b_late = _engine(pg_url)
    released = asyncio.Event()
    held_up: list[int] = []
    async with e:
        await _until(lambda: len(e.stats()["partitions"]) == 64, patience=15)
        assert e._node is not None and e._node.store is not None
        store = e._node.store
        claim_limited = store.claim_limited

        async def late(*args: Any, **kwargs: Any) -> Any:
            held_up.append(1)
            await released.wait()
            return await claim_limited(*args, **kwargs)

        monkeypatch.setattr(store, "claim_limited", late)
        due = time.time() + 0.5
        await e.schedule_many([{"handler": "a", "at": due, "key": f"a{i}"} for i in range(10)])
        await e.schedule_many(
            [{"handler": "b", "at": due + i / 10, "key": f"b{i}"} for i in range(10)]
        )
        try:
            await _until(lambda: len(b_late) == 10, patience=HELD)
            started_while_held = len(a_starts)
        finally:
            released.set()
        await _until(lambda: len(a_starts) == 10, patience=15)
    assert held_up  # A's claim was really held up, and A started only after it
    assert started_while_held == 0
    assert max(b_late) < LATE_BOUND, sorted(b_late)
    assert await asyncio.to_thread(_limited_rows, pg_url) == [(2, 1)] * 10
