"""The engine with a real SQLite journal: restarts, cancels, attempts, versions, locking."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path

import pytest

from wheel_engine import (
    CancelResult,
    Engine,
    Firing,
    JournalLocked,
    RetryPolicy,
    TimerState,
    UnknownHandler,
)
from wheel_engine.testing import VirtualClock


def make(path: Path, clock: VirtualClock, fired: list[Firing], **options: object) -> Engine:
    engine = Engine(path, clock=clock, durability="normal", **options)  # type: ignore[arg-type]

    @engine.handler("h")
    async def handle(firing: Firing) -> None:
        fired.append(firing)

    return engine


async def test_timers_survive_a_restart_and_overdue_ones_fire_at_once(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    clock = VirtualClock()
    fired: list[Firing] = []
    async with make(db, clock, fired) as engine:
        for i in range(5):
            await engine.schedule("h", delay=10 + i, key=f"k{i}", payload={"i": i})
        await engine.schedule("h", delay=100, key="later")
    assert fired == []
    clock.jump(50)  # the service was down for 50 s
    fired2: list[Firing] = []
    async with make(db, clock, fired2) as engine:
        await clock.settle()
        await clock.advance(0.01)
        assert [f.key for f in fired2] == [f"k{i}" for i in range(5)]  # in due order
        assert [f.payload for f in fired2] == [{"i": i} for i in range(5)]
        assert all(f.fired_at >= f.due for f in fired2)
        assert engine.get("later").state is TimerState.PENDING  # type: ignore[union-attr]


async def test_cancel_is_final_across_restarts(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    clock = VirtualClock()
    fired: list[Firing] = []
    async with make(db, clock, fired) as engine:
        await engine.schedule("h", delay=5, key="a")
        await engine.schedule("h", delay=5, key="b")
        assert await engine.cancel("a") is CancelResult.CANCELED
    clock.jump(10)
    async with make(db, clock, fired) as engine:
        await clock.advance(1)
        assert [f.key for f in fired] == ["b"]
        assert engine.get("a").state is TimerState.CANCELED  # type: ignore[union-attr]
        assert await engine.cancel("a") is CancelResult.ALREADY_DONE


async def test_versions_keep_growing_across_restart_and_compaction(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    clock = VirtualClock()
    fired: list[Firing] = []
    async with make(db, clock, fired, retention=0.0) as engine:
        infos = [await engine.schedule("h", delay=1, key=f"k{i}") for i in range(5)]
        await clock.advance(2)
        await engine.compact()  # all finished and past retention: the snapshot is empty
        top = max(i.version for i in infos)
    async with make(db, clock, fired) as engine:
        info = await engine.schedule("h", delay=1)
        assert info.version > top


async def test_attempts_survive_a_crash_and_running_comes_back_pending(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    clock = VirtualClock()
    engine = Engine(db, clock=clock, durability="normal")
    release = asyncio.Event()

    @engine.handler("h")
    async def hang(firing: Firing) -> None:
        await release.wait()

    await engine.start()
    await engine.schedule("h", delay=1, key="k")
    await clock.advance(1)
    assert engine.get("k").state is TimerState.RUNNING  # type: ignore[union-attr]
    await engine.close(grace=0)  # the handler is cancelled: not acknowledged
    fired: list[Firing] = []
    async with make(db, clock, fired):
        await clock.advance(0.01)
        assert [(f.key, f.attempt) for f in fired] == [("k", 2)]
        assert fired[0].idempotency_key.startswith("k#")


async def test_poison_timer_runs_exactly_max_attempts_across_crashes(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    clock = VirtualClock()
    runs: list[int] = []

    async def poison(firing: Firing) -> None:
        runs.append(firing.attempt)
        await asyncio.Event().wait()  # "crashes": never returns; the run ends without an ack

    policy = RetryPolicy(max_attempts=3, initial=0, jitter=False)
    for _ in range(4):
        engine = Engine(db, clock=clock, durability="normal")
        engine.register("h", poison, retry=policy)
        await engine.start()
        if engine.get("k") is None:
            await engine.schedule("h", delay=0, key="k")
        await clock.advance(0.01)
        await engine.close(grace=0)
    assert runs == [1, 2, 3]
    engine = Engine(db, clock=clock, durability="normal")
    engine.register("h", poison, retry=policy)
    async with engine:
        info = engine.get("k")
        assert info is not None and info.state is TimerState.DEAD and info.attempts == 3
        assert info.last_error == "attempt 3 was interrupted"


async def _hang(firing: Firing) -> None:
    await asyncio.Event().wait()


async def test_second_engine_is_locked_out(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    async with Engine(db, durability="normal"):
        with pytest.raises(JournalLocked) as excinfo:
            await Engine(db).start()
        assert str(db) in str(excinfo.value)


async def test_journal_is_private_to_its_owner(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    async with Engine(db, durability="normal"):
        pass
    for path in tmp_path.iterdir():
        assert stat.S_IMODE(os.stat(path).st_mode) & 0o077 == 0, path


async def test_bad_input_writes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    clock = VirtualClock()
    async with make(db, clock, []) as engine:
        await engine.schedule("h", delay=5, key="k", payload=1)
        assert engine.journal is not None
        before = engine.journal.tail_records
        for bad in (
            {"handler": "nope", "delay": 1},
            {"handler": "h", "delay": -1},
            {"handler": "h", "delay": 1, "payload": {1, 2}},
            {"handler": "h", "delay": 1, "payload": b"x" * 70_000},
            {"handler": "h", "delay": 1, "key": ""},
        ):
            with pytest.raises((UnknownHandler, ValueError, TypeError)):
                handler = bad.pop("handler")
                await engine.schedule(handler, **bad)  # type: ignore[arg-type]
        await engine.journal.flush()
        assert engine.journal.tail_records == before


async def test_concurrent_schedules_share_commits(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    clock = VirtualClock()
    async with make(db, clock, []) as engine:
        assert engine.journal is not None
        commits: list[int] = []
        engine.journal.on_commit = lambda size, seconds: commits.append(size)
        infos = await asyncio.gather(
            *(engine.schedule("h", delay=60, key=f"k{i}") for i in range(2000))
        )
        assert len(infos) == 2000
        assert sum(commits) == 2000 and len(commits) <= 10


async def test_finished_timers_stay_readable_for_the_retention(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    clock = VirtualClock()
    fired: list[Firing] = []
    async with make(db, clock, fired, retention=3600) as engine:
        await engine.schedule("h", delay=1, key="done")
        await clock.advance(2)
    async with make(db, clock, fired, retention=3600) as engine:
        assert engine.get("done").state is TimerState.SUCCEEDED  # type: ignore[union-attr]
        await clock.advance(3601)
        await engine.compact()
        assert engine.get("done") is None


async def test_journal_stays_bounded_under_churn(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    clock = VirtualClock()
    async with make(db, clock, [], retention=0.0, compact_min_records=500) as engine:
        assert engine.journal is not None
        for round_ in range(20):
            await engine.schedule_many(
                [{"handler": "h", "delay": 1, "key": f"r{round_}-{i}"} for i in range(100)]
            )
            await engine.cancel(f"r{round_}-0")
            await clock.advance(2)
        await clock.settle()
        # 20 rounds x ~300 records were written; compaction keeps the tail near the live set.
        assert engine.journal.tail_records < 1500


async def test_recovered_timer_without_its_handler_waits_for_registration(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    clock = VirtualClock()
    fired: list[Firing] = []
    async with make(db, clock, fired) as engine:
        await engine.schedule("h", delay=1, key="k")
    engine = Engine(db, clock=clock, durability="normal")  # this process lacks "h" at first
    async with engine:
        await clock.advance(5)
        assert engine.stats()["unhandled"] == 1 and fired == []
        assert engine.get("k").state is TimerState.PENDING  # type: ignore[union-attr]
        engine.register("h", fired.append)
        await clock.advance(0.01)
        assert [f.key for f in fired] == ["k"] and engine.stats()["unhandled"] == 0
