"""``limit_scope="cluster"`` (issue 26): a handler's concurrency and rate held by three engines
on one database together, through its row in ``wheel_limits``.

Three engines in one process (one clock for every start and end they record), real time and
short leases; the node processes' test (a node SIGKILLed holding slots) is
``test_nodes_cluster_limits_kill.py``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest
from node_support import engine, sql, until

from wheel_engine import Engine, Firing

pytestmark = pytest.mark.slow

NODES = ("a", "b", "c")


def _three(url: str, register: Callable[[Engine, str], None]) -> list[Engine]:
    engines = [engine(url, name) for name in NODES]
    for e, name in zip(engines, NODES, strict=True):
        register(e, name)
    return engines


def _peak(spans: list[tuple[float, float]]) -> int:
    """The most spans open at one instant (an end before a start at the same instant)."""
    edges = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    peak = running = 0
    for _, step in edges:
        running += step
        peak = max(peak, running)
    return peak


def _charged_waiting(url: str) -> int:
    """Rows of handler "h" waiting (PENDING) yet charged an attempt: must stay 0."""
    return int(
        sql(
            url,
            "SELECT count(*) FROM wheel_timers WHERE handler = 'h' AND state = 0 AND attempts > 0",
        )[0][0]
    )


async def _watch_uncharged(url: str, seen: list[int], stop: asyncio.Event) -> None:
    while not stop.is_set():
        seen.append(await asyncio.to_thread(_charged_waiting, url))
        await asyncio.sleep(0.05)


async def test_the_concurrency_cap_holds_across_three_nodes(pg_url: str) -> None:
    spans: list[tuple[float, float]] = []
    nodes: dict[str, int] = {}

    def register(e: Engine, name: str) -> None:
        async def h(firing: Firing) -> None:
            start = time.monotonic()
            await asyncio.sleep(0.15)
            spans.append((start, time.monotonic()))
            nodes[name] = nodes.get(name, 0) + 1

        e.register("h", h, concurrency=3, limit_scope="cluster")

    engines = _three(pg_url, register)
    seen: list[int] = []
    stop = asyncio.Event()
    async with engines[0], engines[1], engines[2]:
        await until(lambda: all(len(e.stats()["partitions"]) >= 20 for e in engines))
        now = time.time()
        await engines[0].schedule_many(
            [{"handler": "h", "at": now + 0.3, "key": f"t{i}"} for i in range(45)]
        )
        watcher = asyncio.create_task(_watch_uncharged(pg_url, seen, stop))
        await until(lambda: len(spans) == 45, patience=30)
        stop.set()
        await watcher
        limits = {e.stats()["node"]: e.stats()["limits"]["h"] for e in engines}
    assert _peak(spans) == 3  # never more than 3 at once, and the cap was reached
    assert len(nodes) == 3  # every node started some: the cap is the cluster's, not a node's
    assert seen and max(seen) == 0  # a timer waiting for a slot is never charged
    rows = sql(pg_url, "SELECT attempts, state FROM wheel_timers WHERE handler = 'h'")
    assert rows == [(1, 2)] * 45  # each started once: no refusal cost an attempt
    assert all(figures["scope"] == "cluster" for figures in limits.values())
    assert sum(figures["throttled"] for figures in limits.values()) > 0


async def test_the_rate_holds_across_three_nodes(pg_url: str) -> None:
    rate, burst, count = 20.0, 5, 65
    starts: list[float] = []

    def register(e: Engine, name: str) -> None:
        def h(firing: Firing) -> None:
            starts.append(time.monotonic())

        e.register("h", h, rate=rate, burst=burst, limit_scope="cluster")

    engines = _three(pg_url, register)
    async with engines[0], engines[1], engines[2]:
        await until(lambda: all(len(e.stats()["partitions"]) >= 20 for e in engines))
        now = time.time()
        await engines[1].schedule_many(
            [{"handler": "h", "at": now + 0.3, "key": f"t{i}"} for i in range(count)]
        )
        await until(lambda: len(starts) == count, patience=30)
        cluster = [e.stats()["cluster"].get("h") for e in engines]
    starts.sort()
    # Any n starts span at least (n - burst) / rate seconds: the bucket's own bound, with
    # 50 ms for a start's handler running later than its claim committed.
    for i in range(len(starts)):
        for j in range(i + burst, len(starts)):
            assert j - i + 1 <= burst + rate * (starts[j] - starts[i] + 0.05), (i, j)
    first = starts[0]
    per_second = [sum(1 for s in starts if k <= s - first < k + 1) for k in range(4)]
    assert per_second[0] <= burst + rate and all(n <= rate + 1 for n in per_second[1:])
    took = starts[-1] - first
    assert took < 1.3 * (count - burst) / rate  # and the limit is not much stricter than asked
    assert any(seen is not None for seen in cluster)


async def test_the_limits_of_the_node_that_registered_last_hold(pg_url: str) -> None:
    fired: list[str] = []
    first, second = engine(pg_url, "a"), engine(pg_url, "b")
    first.register("h", lambda f: fired.append(f.key), rate=50.0, limit_scope="cluster")
    second.register("h", lambda f: fired.append(f.key), rate=2.0, burst=1, limit_scope="cluster")
    async with first:
        assert sql(pg_url, "SELECT rate, burst, concurrency FROM wheel_limits") == [
            (50.0, 50, None)
        ]
        async with second:
            row = sql(pg_url, "SELECT rate, burst, concurrency FROM wheel_limits")
            assert row == [(2.0, 1, None)]
            await until(lambda: len(first.stats()["partitions"]) >= 30)
            now = time.time()
            await first.schedule_many(
                [{"handler": "h", "at": now + 0.2, "key": f"t{i}"} for i in range(6)]
            )
            started = time.monotonic()
            await until(lambda: len(fired) == 6)
            took = time.monotonic() - started
    assert took > 2.0  # 1 + 5 more at 2 per second, on either node: the row's, not node a's


def test_cluster_scope_stays_refused_without_postgresql(tmp_path: Any) -> None:
    for path in (None, str(tmp_path / "j.db")):
        e = Engine(path)
        with pytest.raises(ValueError, match="PostgreSQL"):
            e.register("h", lambda f: None, concurrency=1, limit_scope="cluster")


async def test_a_limited_backlog_is_loaded_a_slice_at_a_time_beside_on_time_timers(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loader's cap per handler: a node holds a slice of a limited handler's backlog, not
    all of it, and another handler's timers due behind the backlog fire on time."""
    from wheel_engine.nodes import loading

    monkeypatch.setattr(loading, "CAPPED_ROWS", 100)
    late: list[float] = []
    held: list[int] = []
    e = engine(pg_url, "a")
    e.register("a", lambda f: None, rate=100.0, limit_scope="cluster")
    e.register("b", lambda f: late.append(time.time() - f.due))
    async with e:
        await until(lambda: len(e.stats()["partitions"]) == 64)
        now = time.time()
        backlog = [{"handler": "a", "at": now - 5 + i / 1000, "key": f"a{i}"} for i in range(3000)]
        await e.schedule_many(backlog)
        await e.schedule_many([{"handler": "b", "at": now + 1 + i / 4} for i in range(6)])
        while len(late) < 6:
            held.append(e.stats()["pending"])
            await until(lambda: True)
            await asyncio.sleep(0.05)
            assert time.time() < now + 15, "b never fired"
    assert max(late) < 0.5  # b fires on time beside the backlog
    assert max(held) <= 2 * 100 + 6  # a slice of the backlog in memory, never all of it


async def test_a_limited_backlog_larger_than_the_cap_is_worked_off_to_the_end(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Slice after slice, the whole backlog runs: each read fills the handler's room, and every
    row it brings is adopted. Before, a read that filled the room refused its own rows, so the
    handler stopped for good after its first slice (figure 10's full PostgreSQL run)."""
    from wheel_engine.nodes import loading

    monkeypatch.setattr(loading, "CAPPED_ROWS", 100)
    ran: set[str] = set()
    e = engine(pg_url, "a")
    e.register("a", lambda f: ran.add(f.key), concurrency=20)  # no rate: the cap is 100
    async with e:
        await until(lambda: len(e.stats()["partitions"]) == 64)
        now = time.time()
        await e.schedule_many(
            [{"handler": "a", "at": now - 5 + i / 1000, "key": f"a{i}"} for i in range(500)]
        )
        await until(lambda: len(ran) == 500, patience=20.0)
