"""The next occurrence is committed in the same commit as its predecessor's attempt (#25), on a
virtual clock, in memory and on a real SQLite file read from another connection."""

from __future__ import annotations

from pathlib import Path

import pytest
from journal_view import attempted, records_of, scheduled

from wheel_engine import Engine
from wheel_engine.events import Event
from wheel_engine.model import Firing, TimerState
from wheel_engine.recurring.chain import Chain
from wheel_engine.recurring.records import encode_rule
from wheel_engine.recurring.rule import EveryRule, occurrence_key, occurrence_of
from wheel_engine.retry import RetryPolicy
from wheel_engine.testing import VirtualClock
from wheel_engine.timer import Timer

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z, VirtualClock's start


def _after(key: str) -> str:
    """The key of the occurrence after ``key``'s, in the tests' ``every=10``."""
    found = occurrence_of(key)
    assert found is not None
    return occurrence_key(found[0], found[1] + 10)


@pytest.fixture(params=["memory", "sqlite"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Path | None:
    return None if request.param == "memory" else tmp_path / "j.db"


async def test_the_attempt_commit_holds_the_next_occurrence(tmp_path: Path) -> None:
    """After each commit the journal file is read: the first commit that holds occurrence N's
    attempt holds N+1's schedule too (read again while the handler runs: both are there), and
    a retry of N (a second attempt) schedules N+1 no second time."""
    path = tmp_path / "j.db"
    clock = VirtualClock()
    engine = Engine(path, clock=clock, clock_check=None)
    in_handler: list[tuple[str, set[str], set[str]]] = []
    failed: set[str] = set()

    async def sweep(firing: Firing) -> None:
        records = records_of(path)
        in_handler.append((firing.key, attempted(records), set(scheduled(records))))
        if firing.key == occurrence_key("s", T0 + 20) and firing.key not in failed:
            failed.add(firing.key)
            raise RuntimeError("once")

    engine.register("sweep", sweep, retry=RetryPolicy(max_attempts=3, initial=1.0, jitter=False))
    missing: list[str] = []  # occurrence keys attempted in a commit without their successor
    async with engine:
        journal = engine.journal
        assert journal is not None
        compact = journal.after_commit
        assert compact is not None
        first_seen: set[str] = set()

        def look() -> None:  # runs right after each commit, before any handler of it starts
            records = records_of(path)
            planned = scheduled(records)
            for key in attempted(records) - first_seen:
                first_seen.add(key)
                if _after(key) not in planned:
                    missing.append(key)
            compact()

        journal.after_commit = look
        await engine.schedule_recurring("s", "sweep", every=10)
        await clock.advance(45)
        assert len(first_seen) == 4  # T0+10 .. T0+40 attempted
        assert missing == []
        assert len(in_handler) == 5  # T0+20 twice
        for key, seen_attempts, seen_schedules in in_handler:
            assert key in seen_attempts and _after(key) in seen_schedules
        retried = engine.get(occurrence_key("s", T0 + 20))
        assert retried is not None and retried.attempts == 2
        assert retried.state is TimerState.SUCCEEDED
    counts = scheduled(records_of(path))
    assert counts[occurrence_key("s", T0 + 30)] == 1  # the retry created it no second time
    assert set(counts.values()) == {1}


async def test_the_next_occurrence_is_scheduled_before_its_predecessor_fires(
    where: Path | None,
) -> None:
    """In memory too: each occurrence's successor is ``scheduled`` before it is ``fired``
    (its attempt's start), not by its handler after it fired."""
    clock = VirtualClock()
    engine = Engine(where, clock=clock, clock_check=None)
    events: list[tuple[str, str]] = []

    async def sweep(firing: Firing) -> None:
        events.append(("handler", firing.key))

    def seen(event: Event) -> None:
        if event.kind in ("scheduled", "fired"):
            events.append((str(event.kind), event.key))

    engine.register("sweep", sweep)
    async with engine:
        engine.on_event(seen)
        await engine.schedule_recurring("s", "sweep", every=10)
        await clock.advance(35)
    for k in (1, 2, 3):
        key, after = occurrence_key("s", T0 + 10 * k), occurrence_key("s", T0 + 10 * (k + 1))
        assert events.index(("scheduled", after)) < events.index(("fired", key)), events
        assert events.count(("scheduled", after)) == 1


def test_the_plans_of_refused_claims_do_not_pile_up() -> None:
    """On PostgreSQL a claim can be refused after its occurrence's plan was made (claimed by
    another node, cancelled, its partition lost): its handler never takes that plan. Of 1,000
    such occurrences a few plans at most stay, while those of live occurrences are kept."""
    table: dict[str, Timer] = {}
    chain = Chain(table, VirtualClock(), whole=False)
    chain.started_at = T0
    chain.keep("s", 1, encode_rule(EveryRule(10.0, T0), "sweep", None, "latest", False, T0 + 10))

    def occurrence(k: int, state: TimerState = TimerState.RUNNING) -> Timer:
        key = occurrence_key("s", T0 + 10 * k)
        timer = table[key] = Timer(key, k + 1, "recurring:sweep", T0 + 10 * k, None, state)
        assert chain.successor(timer) is not None
        return timer

    live, cancelled = occurrence(1), occurrence(2)
    cancelled.state = TimerState.CANCELED  # refused: the cancel won
    for k in range(3, 1003):
        del table[occurrence(k).key]  # refused: another node claimed it, or the partition left
    assert len(chain._plans) <= 64
    assert chain.planned(live.key) is not None
    assert chain.planned(cancelled.key) is None
