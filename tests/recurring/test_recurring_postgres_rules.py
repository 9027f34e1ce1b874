"""Recurring timers on PostgreSQL, the calls that change a series: replace, skip one occurrence,
and ``catch_up`` once a node comes back after downtime (#25). The virtual-clock tests of these
run in memory and on SQLite (test_recurring_engine.py); on PostgreSQL a claim is fenced by the
database's clock, so these run in real time, ``slow``; what they assert is deterministic.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any, Literal

import pytest
from pg_cluster import REQUIRED, psycopg

from wheel_engine import Engine, Firing
from wheel_engine.model import TimerInfo, TimerState
from wheel_engine.recurring.rule import occurrence_key, occurrence_of

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(psycopg is None and not REQUIRED, reason="psycopg is not installed"),
]


def node(pg_url: str, fired: list[tuple[float, float]], name: str = "a") -> Engine:
    """Node ``name`` with handler "sweep", which notes (nominal, fired at) of each occurrence."""
    engine = Engine(pg_url, node=name, lease=1.5, horizon=60.0)

    async def sweep(firing: Firing) -> None:
        fired.append((occurrence_of(firing.key)[1], time.time()))  # type: ignore[index]

    engine.register("sweep", sweep)
    return engine


async def until(condition: object, patience: float = 20.0) -> None:
    deadline = time.monotonic() + patience
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"condition not met within {patience} s"
        await asyncio.sleep(0.02)


def once_and_never_early(fired: list[tuple[float, float]]) -> None:
    counts = Counter(nominal for nominal, _ in fired)
    assert set(counts.values()) == {1}, counts
    assert all(at >= nominal for nominal, at in fired)


async def skipped_only(
    canceller: Engine, fired: list[tuple[float, float]], skipped: float, every: float
) -> None:
    """Once two occurrences after the cancelled one at ``skipped`` fired, cancel the series
    from ``canceller``; the skipped one never fired, the very next one did: the series went on."""
    await until(lambda: len([n for n, _ in fired if n > skipped]) >= 2)
    assert await canceller.cancel_recurring("s")
    once_and_never_early(fired)
    assert skipped not in {nominal for nominal, _ in fired}
    later = sorted(nominal for nominal, _ in fired if nominal > skipped)
    assert round(later[0] - skipped, 6) == every


async def test_replacing_the_rule_moves_the_series_to_the_new_one(pg_url: str) -> None:
    fired: list[tuple[float, float]] = []
    async with node(pg_url, fired) as engine:
        first = await engine.schedule_recurring("s", "sweep", every=0.25)
        await until(lambda: len(fired) >= 3)
        second = await engine.schedule_recurring("s", "sweep", every=0.4)
        assert second.version > first.version and second.every == 0.4
        replaced_at = len(fired)
        await until(lambda: len(fired) >= replaced_at + 4)
        assert await engine.cancel_recurring("s", version=second.version)
    once_and_never_early(fired)
    assert second.next_due is not None
    after = sorted(nominal for nominal, _ in fired if nominal >= second.next_due)
    assert after[0] == second.next_due and len(after) >= 4
    assert {round(b - a, 6) for a, b in itertools.pairwise(after)} == {0.4}
    old_grid = {round(first.next_due + 0.25 * n, 6) for n in range(200)}  # type: ignore[operator]
    assert all(round(nominal, 6) in old_grid for nominal, _ in fired if nominal < second.next_due)


async def test_cancelling_one_occurrence_skips_it_only(pg_url: str) -> None:
    fired: list[tuple[float, float]] = []
    async with node(pg_url, fired) as engine:
        await engine.schedule_recurring("s", "sweep", every=0.5)
        await until(lambda: len(fired) >= 2)  # the next one is cancelled well before it is due
        pending = [t for t in engine.timers(TimerState.PENDING) if t.key.startswith("s@2")]
        assert len(pending) == 1
        skipped = occurrence_of(pending[0].key)[1]  # type: ignore[index]
        assert (await engine.cancel(pending[0].key)).name == "CANCELED"
        await skipped_only(engine, fired, skipped, 0.5)
        skipped_row = await engine.lookup(occurrence_key("s", skipped))
    assert skipped_row is not None and skipped_row.state is TimerState.CANCELED


async def test_a_cancel_that_lands_while_the_occurrence_is_being_claimed_skips_it_only(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The claim of the occurrence after the first is held back until its cancel committed:
    the claim is refused, and the series goes on with the next occurrence (before, the node
    told nobody of the cancel, as its entry was charged already, and the series stopped)."""
    from journal.postgres import firing

    real = firing._attempt
    held: list[str] = []
    cancelled = asyncio.Event()

    async def attempt(conn: Any, node_name: str, requests: Any) -> Any:
        keys = [request[0] for request in requests]
        if fired and not held and any(occurrence_of(key) for key in keys):
            held.extend(keys)
            await cancelled.wait()  # the claim is in flight while the cancel commits
        return await real(conn, node_name, requests)

    monkeypatch.setattr(firing, "_attempt", attempt)
    fired: list[tuple[float, float]] = []
    async with node(pg_url, fired) as engine:
        await engine.schedule_recurring("s", "sweep", every=0.25)
        await until(lambda: bool(held))
        skipped = occurrence_of(held[0])[1]  # type: ignore[index]
        assert (await engine.cancel(held[0])).name == "CANCELED"
        cancelled.set()
        await skipped_only(engine, fired, skipped, 0.25)


@contextlib.asynccontextmanager
async def two_nodes(
    pg_url: str, fired: list[tuple[float, float]]
) -> AsyncIterator[tuple[Engine, Engine, TimerInfo]]:
    """Nodes a and b, the partitions balanced, an ``every=0.5`` series "s" scheduled on a and
    fired once. -> (the node holding the series, the other, the series' pending occurrence)."""
    a, b = node(pg_url, fired, "a"), node(pg_url, fired, "b")
    async with a, b:
        await until(lambda: len(a.stats()["partitions"]) == len(b.stats()["partitions"]) == 32)
        await a.schedule_recurring("s", "sweep", every=0.5)
        await until(lambda: len(fired) >= 1)
        holder = next(e for e in (a, b) if any(t.key.startswith("s@2") for t in e.timers()))
        [pending] = [t for t in holder.timers(TimerState.PENDING) if t.key.startswith("s@2")]
        yield holder, b if holder is a else a, pending


async def test_a_cancel_from_another_node_skips_one_occurrence_only(pg_url: str) -> None:
    """The node that does not hold the series cancels its pending occurrence: the holder
    learns it from the change feed, and the series goes on after it (before, the holder
    filed the CANCELED row silently, and the series stopped)."""
    fired: list[tuple[float, float]] = []
    async with two_nodes(pg_url, fired) as (_, other, pending):
        skipped = occurrence_of(pending.key)[1]  # type: ignore[index]
        assert (await other.cancel(pending.key)).name == "CANCELED"
        await skipped_only(other, fired, skipped, 0.5)


async def down_and_back(
    pg_url: str, fired: list[tuple[float, float]], catch_up: Literal["latest", "all", "skip"]
) -> tuple[float, float]:
    """Run an ``every=0.2`` series, stop the only node for 1.2 s (about five occurrences
    missed), bring it back until two occurrences after its start fired, cancel the series.
    -> (the last nominal time fired before the downtime, when the node came back: occurrences
    due before it were missed)."""
    async with node(pg_url, fired) as engine:
        await engine.schedule_recurring("s", "sweep", every=0.2, catch_up=catch_up)
        await until(lambda: len(fired) >= 2)
    before = max(nominal for nominal, _ in fired)
    await asyncio.sleep(1.2)
    async with node(pg_url, fired) as engine:
        back = engine._series._chain.started_at
        await until(lambda: len([n for n, _ in fired if n > back]) >= 2)
        assert await engine.cancel_recurring("s")
    once_and_never_early(fired)
    missed = [nominal for nominal in (before + 0.2 * k for k in range(1, 100)) if nominal < back]
    assert len(missed) >= 5
    return before, back


async def test_catch_up_latest_fires_the_last_missed_occurrence_once_after_downtime(
    pg_url: str,
) -> None:
    fired: list[tuple[float, float]] = []
    before, back = await down_and_back(pg_url, fired, "latest")
    missed = [nominal for nominal in (before + 0.2 * k for k in range(1, 100)) if nominal < back]
    fired_missed = [nominal for nominal, _ in fired if before < nominal < back]
    assert fired_missed == pytest.approx([missed[-1]]), (fired_missed, missed)  # the latest, once
    later = sorted(nominal for nominal, _ in fired if nominal >= back)
    assert later and later[0] == pytest.approx(missed[-1] + 0.2)  # then on, none skipped


async def test_catch_up_all_fires_every_missed_occurrence_once_in_order_after_downtime(
    pg_url: str,
) -> None:
    fired: list[tuple[float, float]] = []
    before, back = await down_and_back(pg_url, fired, "all")
    after = [nominal for nominal, _ in fired if nominal >= before]  # in the order they fired
    assert after == sorted(after)
    assert {round(b - a, 6) for a, b in itertools.pairwise(after)} == {0.2}  # none left out
    assert after[-1] > back


async def test_catch_up_skip_fires_no_missed_occurrence_after_downtime(pg_url: str) -> None:
    fired: list[tuple[float, float]] = []
    before, back = await down_and_back(pg_url, fired, "skip")
    after = sorted(nominal for nominal, _ in fired if nominal > before)
    assert after and after[0] >= back  # none of the missed ones, not even the pending one
    assert {round(b - a, 6) for a, b in itertools.pairwise(after)} == {0.2}  # then on, each
    steps = (after[0] - before) / 0.2
    assert steps == pytest.approx(round(steps), abs=1e-3)  # on the series' grid


async def test_a_rule_replaced_from_another_node_adds_no_occurrence_before_its_first(
    pg_url: str,
) -> None:
    """The node that does not hold the series replaces its rule by one that starts in an hour.
    The holder learns from the feed that the old rule's pending occurrence was cancelled, and
    adds nothing: the new rule's first occurrence was committed with it (before, the holder
    went on from the cancelled one by the new rule, and made an occurrence before the new
    rule's first, which would have run nothing)."""
    fired: list[tuple[float, float]] = []
    async with two_nodes(pg_url, fired) as (holder, other, pending):
        start = time.time() + 3600
        new = await other.schedule_recurring("s", "sweep", cron="* * * * *", start=start)
        seen = holder.get  # the holder's table: the cancel came in by the feed
        await until(lambda: getattr(seen(pending.key), "state", None) is TimerState.CANCELED)
        await until(lambda: not holder._series._tasks)  # what the holder did on that cancel
        old = occurrence_of(pending.key)[1]  # type: ignore[index]
        extra = (old // 60 + 1) * 60  # the new rule's next minute after the cancelled one
        assert new.next_due is not None and extra < new.next_due
        assert await holder.lookup(occurrence_key("s", extra)) is None
        assert [r.next_due for r in await holder.recurrences()] == [new.next_due]
