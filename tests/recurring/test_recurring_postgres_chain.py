"""On PostgreSQL the next occurrence is inserted in the transaction that claims its predecessor's
attempt (#25): read from another connection right after each claim committed, it is there, on
the node that scheduled the recurrence and on one that took its partition over.

Real time and a real server (the claim is fenced by the database's clock), so ``slow``.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pg_cluster import REQUIRED, psycopg

from wheel_engine import Engine, Firing
from wheel_engine.recurring.rule import occurrence_key, occurrence_of
from wheel_engine.recurring.series import Series

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(psycopg is None and not REQUIRED, reason="psycopg is not installed"),
]

STEP = 0.25
WORKER = Path(__file__).with_name("soak_worker.py")  # a node process: "soak", every=0.2


def watch_claims(
    monkeypatch: pytest.MonkeyPatch, pg_url: str, step: float
) -> list[tuple[str, str, bool]]:
    """Every occurrence claimed from now on in this process, as ``(node, key, its successor
    was there once the claim had committed)``, read from another connection."""
    from journal.postgres import firing

    real = firing.attempt
    claims: list[tuple[str, str, bool]] = []

    async def attempt(conn: Any, node: str, requests: Any, *more: Any) -> Any:
        result = await real(conn, node, requests, *more)  # committed when it returns
        claimed = [c.key for c in result.claimed if occurrence_of(c.key)]
        if claimed:
            async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as other:
                for key in claimed:
                    name, nominal = occurrence_of(key)  # type: ignore[misc]
                    after = occurrence_key(name, nominal + step)
                    cur = await other.execute("SELECT 1 FROM wheel_timers WHERE key = %s", (after,))
                    claims.append((node, key, await cur.fetchone() is not None))
        return result

    monkeypatch.setattr(firing, "attempt", attempt)
    return claims


async def run_series(
    pg_url: str,
    count: int,
    *,
    node: str = "a",
    name: str = "s",
    handler: str = "sweep",
    every: float | None = STEP,
    seen: Callable[[Any], None] | None = None,
) -> list[tuple[str, float]]:
    """Run recurrence ``name`` on ``node`` until ``count`` occurrences fired, then cancel it:
    the keys fired, with when. ``every=None``: it was scheduled elsewhere, not here."""
    fired: list[tuple[str, float]] = []
    engine = Engine(pg_url, node=node, lease=1.5, horizon=60.0)

    async def run(firing: Firing) -> None:
        fired.append((firing.key, time.time()))

    engine.register(handler, run)
    async with engine:
        if seen is not None:
            engine.on_event(seen)
        if every is not None:
            await engine.schedule_recurring(name, handler, every=every)
        deadline = time.monotonic() + 20
        while len(fired) < count and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert await engine.cancel_recurring(name)
    assert len(fired) >= count, fired
    return fired


async def test_the_claim_commits_the_next_occurrence(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    claims = watch_claims(monkeypatch, pg_url, STEP)
    fired = await run_series(pg_url, 6)
    assert len(claims) >= 6 and all(there for _, _, there in claims), claims
    counts = Counter(key for key, _ in fired)
    assert set(counts.values()) == {1}, counts
    assert all(at >= occurrence_of(key)[1] for key, at in fired)  # type: ignore[index]


async def test_each_successor_the_claim_inserts_is_scheduled_once(pg_url: str) -> None:
    """The ``scheduled`` event of an occurrence inserted by its predecessor's claim comes once,
    before that predecessor is ``fired``, as in memory and on SQLite."""
    events: list[tuple[str, str]] = []

    def seen(event: Any) -> None:
        if event.kind in ("scheduled", "fired"):
            events.append((str(event.kind), event.key))

    fired = await run_series(pg_url, 5, seen=seen)
    for key, _ in fired[:4]:
        name, nominal = occurrence_of(key)  # type: ignore[misc]
        after = occurrence_key(name, nominal + STEP)
        assert events.count(("scheduled", after)) == 1, (after, events)
        assert events.index(("scheduled", after)) < events.index(("fired", key)), events


async def test_after_a_takeover_the_first_occurrence_commits_its_successor_with_its_claim(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Node a (a process) runs the series and is SIGKILLed; node b takes its partitions once
    the lease lapses. b never scheduled the recurrence nor read its record, yet each occurrence
    it claims, the first included, has its successor in the claim's commit: b read the record
    as it loaded the partition (before, the first one's handler committed it afterwards)."""
    log = tmp_path / "fired.log"
    victim = subprocess.Popen([sys.executable, str(WORKER), pg_url, str(log), "-", "a"])
    try:
        deadline = time.monotonic() + 20
        while not log.exists() or len(log.read_text().splitlines()) < 3:
            assert victim.poll() is None and time.monotonic() < deadline, "a never ran it"
            await asyncio.sleep(0.05)
    finally:
        victim.send_signal(signal.SIGKILL)
        victim.wait()
    claims = watch_claims(monkeypatch, pg_url, 0.2)
    from_handlers: list[float] = []  # successors b's handlers had to commit themselves
    real = Series._materialize

    async def materialize(self: Series, name: str, fields: Any, nominal: float) -> None:
        from_handlers.append(nominal)
        await real(self, name, fields, nominal)

    monkeypatch.setattr(Series, "_materialize", materialize)
    await run_series(pg_url, 4, node="b", name="soak", handler="tick", every=None)
    ours = [(key, there) for node, key, there in claims if node == "b"]
    assert len(ours) >= 4 and all(there for _, there in ours), ours
    assert from_handlers == []


async def test_a_refused_claim_leaves_no_successor_planned(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first claim of an occurrence is refused (as when another node holds its row: here
    it is put back PENDING, as a takeover would). Its successor's plan ends with that answer,
    so the occurrence's next claim carries the successor again; one left planned would make
    every later claim of it go without, and its handler commit it instead."""
    from journal.postgres import firing
    from journal.postgres.states import PENDING_CODE

    real = firing._attempt
    refused: list[str] = []

    async def refusing(conn: Any, node: str, requests: Any) -> Any:
        result = await real(conn, node, requests)
        keys = [c.key for c in result.claimed if occurrence_of(c.key)]
        if refused or not keys:
            return result
        refused.extend(keys)
        await conn.execute(
            "UPDATE wheel_timers SET state = %s WHERE key = ANY(%s)", (PENDING_CODE, keys)
        )
        return result._replace(claimed=[c for c in result.claimed if c.key not in keys])

    monkeypatch.setattr(firing, "_attempt", refusing)
    claims = watch_claims(monkeypatch, pg_url, STEP)
    fired = await run_series(pg_url, 4)
    assert refused and refused[0] in {key for key, _ in fired}  # claimed again, and run
    assert len(claims) >= 4 and all(there for _, _, there in claims), claims
