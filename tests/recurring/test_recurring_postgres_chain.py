"""On PostgreSQL the next occurrence is inserted in the transaction that claims its predecessor's
attempt (#25): read from another connection right after each claim committed, it is there.

Real time and a real server (the claim is fenced by the database's clock), so ``slow``.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

import pytest
from pg_cluster import REQUIRED, psycopg

from wheel_engine import Engine, Firing
from wheel_engine.recurring.rule import occurrence_key, occurrence_of

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(psycopg is None and not REQUIRED, reason="psycopg is not installed"),
]

STEP = 0.25


async def test_the_claim_commits_the_next_occurrence(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from journal.postgres import firing

    real = firing.attempt
    checked: list[str] = []
    missing: list[str] = []  # occurrences claimed in a commit that did not hold their successor

    async def attempt(conn: Any, node: str, requests: Any, *more: Any) -> Any:
        result = await real(conn, node, requests, *more)  # committed when it returns
        claimed = [c.key for c in result.claimed if occurrence_of(c.key)]
        if claimed:
            async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as other:
                for key in claimed:
                    name, nominal = occurrence_of(key)  # type: ignore[misc]
                    after = occurrence_key(name, nominal + STEP)
                    cur = await other.execute("SELECT 1 FROM wheel_timers WHERE key = %s", (after,))
                    checked.append(key)
                    if await cur.fetchone() is None:
                        missing.append(key)
        return result

    monkeypatch.setattr(firing, "attempt", attempt)
    fired: list[tuple[str, float]] = []
    engine = Engine(pg_url, node="a", lease=1.5, horizon=60.0)

    async def sweep(firing: Firing) -> None:
        fired.append((firing.key, time.time()))

    engine.register("sweep", sweep)
    async with engine:
        await engine.schedule_recurring("s", "sweep", every=STEP)
        deadline = time.monotonic() + 20
        while len(fired) < 6 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert await engine.cancel_recurring("s")
    assert len(fired) >= 6
    assert len(checked) >= 6 and missing == []
    counts = Counter(key for key, _ in fired)
    assert set(counts.values()) == {1}, counts
    assert all(at >= occurrence_of(key)[1] for key, at in fired)  # type: ignore[index]


async def test_each_successor_the_claim_inserts_is_scheduled_once(pg_url: str) -> None:
    """The ``scheduled`` event of an occurrence inserted by its predecessor's claim comes once,
    before that predecessor is ``fired``, as in memory and on SQLite."""
    events: list[tuple[str, str]] = []
    fired: list[str] = []
    engine = Engine(pg_url, node="a", lease=1.5, horizon=60.0)

    async def sweep(firing: Firing) -> None:
        fired.append(firing.key)

    def seen(event: Any) -> None:
        if event.kind in ("scheduled", "fired"):
            events.append((str(event.kind), event.key))

    engine.register("sweep", sweep)
    async with engine:
        engine.on_event(seen)
        await engine.schedule_recurring("s", "sweep", every=STEP)
        deadline = time.monotonic() + 20
        while len(fired) < 5 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert await engine.cancel_recurring("s")
    assert len(fired) >= 5
    for key in fired[:4]:
        name, nominal = occurrence_of(key)  # type: ignore[misc]
        after = occurrence_key(name, nominal + STEP)
        assert events.count(("scheduled", after)) == 1, (after, events)
        assert events.index(("scheduled", after)) < events.index(("fired", key)), events
