"""Disk full, read-only, I/O errors: the call raises, nothing committed is lost, and the engine
keeps serving what it has. The journal's own tests cause real failures; here the journal's
``submit_rows`` and ``submit_row`` (every write passes through one of them, ``submit``'s too)
are made to fail so the engine's side of the contract is checked exactly, on every path."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from journal import Journal
from wheel_engine import CancelResult, Engine, Firing, JournalError, RetryPolicy, TimerState
from wheel_engine.testing import VirtualClock

Row = tuple[int, bytes]


class FailingSubmits:
    """Makes ``journal.submit_rows`` and ``submit_row`` fail while ``failing`` is True (as
    with a full disk)."""

    def __init__(self, journal: Journal) -> None:
        self.failing = False
        self._submit = journal.submit_rows
        self._submit_one = journal.submit_row
        journal.submit_rows = self.submit  # type: ignore[method-assign]
        journal.submit_row = self.submit_one  # type: ignore[method-assign]

    def submit(self, rows: list[Row]) -> asyncio.Future[None]:
        return self._submit(rows) if not self.failing else self._failed()

    def submit_one(self, kind: int, body: bytes) -> asyncio.Future[None]:
        return self._submit_one(kind, body) if not self.failing else self._failed()

    def _failed(self) -> asyncio.Future[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        future.set_exception(JournalError("database or disk is full: t.db"))
        return future


def engine_with(path: Path, clock: VirtualClock, fired: list[Firing]) -> Engine:
    engine = Engine(path, clock=clock, durability="normal")

    @engine.handler("h")
    async def handle(firing: Firing) -> None:
        fired.append(firing)

    return engine


async def test_failed_schedule_raises_and_leaves_no_trace(tmp_path: Path) -> None:
    clock = VirtualClock()
    fired: list[Firing] = []
    async with engine_with(tmp_path / "t.db", clock, fired) as engine:
        assert engine.journal is not None
        disk = FailingSubmits(engine.journal)
        old = await engine.schedule("h", delay=5, key="k", payload="old")
        disk.failing = True
        with pytest.raises(JournalError):
            await engine.schedule("h", delay=1, key="k", payload="new")
        with pytest.raises(JournalError):
            await engine.schedule("h", delay=1, key="fresh")
        info = engine.get("k")
        assert info is not None and (info.version, info.payload) == (old.version, "old")
        assert engine.get("fresh") is None
        disk.failing = False
        await clock.advance(6)
        assert [(f.key, f.payload) for f in fired] == [("k", "old")]


async def test_failed_cancel_raises_and_the_timer_still_fires(tmp_path: Path) -> None:
    clock = VirtualClock()
    fired: list[Firing] = []
    async with engine_with(tmp_path / "t.db", clock, fired) as engine:
        assert engine.journal is not None
        disk = FailingSubmits(engine.journal)
        await engine.schedule("h", delay=5, key="k")
        disk.failing = True
        with pytest.raises(JournalError):
            await engine.cancel("k")
        disk.failing = False
        assert engine.get("k").state is TimerState.PENDING  # type: ignore[union-attr]
        await clock.advance(6)
        assert [f.key for f in fired] == ["k"]
        assert await engine.cancel("k") is CancelResult.ALREADY_DONE


async def test_uncommitted_attempt_is_not_run_until_it_commits(tmp_path: Path) -> None:
    clock = VirtualClock()
    fired: list[Firing] = []
    async with engine_with(tmp_path / "t.db", clock, fired) as engine:
        assert engine.journal is not None
        disk = FailingSubmits(engine.journal)
        await engine.schedule("h", delay=1, key="k")
        disk.failing = True
        await clock.advance(1)
        assert fired == []  # its attempt could not be committed, so it did not run
        assert engine.get("k").state is TimerState.PENDING  # type: ignore[union-attr]
        disk.failing = False
        await clock.advance(1)
        assert [(f.key, f.attempt) for f in fired] == [("k", 1)]


def test_failing_submits_really_fail() -> None:
    async def check() -> Any:
        loop = asyncio.get_running_loop()
        stub = type(
            "J",
            (),
            {
                "submit_rows": lambda self, rows: loop.create_future(),
                "submit_row": lambda self, kind, body: loop.create_future(),
            },
        )()
        disk = FailingSubmits(stub)  # type: ignore[arg-type]
        disk.failing = True
        with pytest.raises(JournalError):
            await disk.submit([])
        with pytest.raises(JournalError):
            await disk.submit_one(1, b"")

    asyncio.run(check())


async def test_failed_redrive_leaves_the_timer_dead(tmp_path: Path) -> None:
    clock = VirtualClock()
    engine = Engine(tmp_path / "t.db", clock=clock, durability="normal")
    calls: list[int] = []

    @engine.handler("bad", retry=RetryPolicy(max_attempts=1))
    async def bad(firing: Firing) -> None:
        calls.append(firing.version)
        raise RuntimeError("no")

    async with engine:
        assert engine.journal is not None
        disk = FailingSubmits(engine.journal)
        dead = await engine.schedule("bad", delay=0, key="k")
        await clock.advance(1)
        disk.failing = True
        with pytest.raises(JournalError):
            await engine.redrive("k")
        disk.failing = False
        info = engine.get("k")
        assert info is not None and (info.state, info.version) == (TimerState.DEAD, dead.version)
        await clock.advance(5)
        assert calls == [dead.version]  # the failed redrive did not run it again
        again = await engine.redrive("k")
        await clock.advance(1)
        assert calls == [dead.version, again.version]


class HeldSubmits:
    """Holds every submit's future so a test decides when, and how, the commit ends."""

    def __init__(self, journal: Journal) -> None:
        self.held: list[asyncio.Future[None]] = []
        self._journal = journal
        self._real = (journal.submit_rows, journal.submit_row)
        journal.submit_rows = self.submit  # type: ignore[method-assign]
        journal.submit_row = self.submit_one  # type: ignore[method-assign]

    def release(self) -> None:
        """Submits reach the journal again."""
        self._journal.submit_rows, self._journal.submit_row = self._real  # type: ignore[method-assign]

    def submit(self, rows: list[Row]) -> asyncio.Future[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.held.append(future)
        return future

    def submit_one(self, kind: int, body: bytes) -> asyncio.Future[None]:
        return self.submit([(kind, body)])


async def test_a_caller_that_stops_waiting_undoes_nothing(tmp_path: Path) -> None:
    clock = VirtualClock()
    async with engine_with(tmp_path / "t.db", clock, []) as engine:
        assert engine.journal is not None
        call = asyncio.ensure_future(engine.schedule("h", delay=5, key="k"))
        await asyncio.sleep(0)
        call.cancel()  # e.g. the web request that scheduled it went away mid-commit
        with pytest.raises(asyncio.CancelledError):
            await call
        await engine.journal.flush()
        assert engine.get("k") is not None  # memory agrees with the journal, which wrote it
    async with engine_with(tmp_path / "t.db", clock, []) as engine:
        info = engine.get("k")
        assert info is not None and info.state is TimerState.PENDING


async def test_keep_waits_for_the_kept_timers_commit(tmp_path: Path) -> None:
    clock = VirtualClock()
    async with engine_with(tmp_path / "t.db", clock, []) as engine:
        assert engine.journal is not None
        held = HeldSubmits(engine.journal)
        first = asyncio.ensure_future(engine.schedule("h", delay=5, key="k"))
        kept = asyncio.ensure_future(engine.schedule("h", delay=9, key="k", on_conflict="keep"))
        await asyncio.sleep(0)
        assert not kept.done()  # the kept timer is not durable yet
        held.held[0].set_exception(JournalError("disk full"))
        for call in (first, kept):
            with pytest.raises(JournalError):
                await call
        assert engine.get("k") is None
        held.release()


@pytest.mark.parametrize("fails_first", ["schedule", "cancel"])
async def test_a_cancel_that_failed_with_its_timers_schedule_brings_back_nothing(
    tmp_path: Path, fails_first: str
) -> None:
    # Both calls raise, so neither happened: the key must be unknown and nothing may fire. The
    # writer fails its batches in order (the schedule's first); the other order is checked too.
    clock = VirtualClock()
    fired: list[Firing] = []
    async with engine_with(tmp_path / "t.db", clock, fired) as engine:
        assert engine.journal is not None
        held = HeldSubmits(engine.journal)
        schedule = asyncio.ensure_future(engine.schedule("h", delay=1, key="k"))
        await asyncio.sleep(0)
        cancel = asyncio.ensure_future(engine.cancel("k"))
        await asyncio.sleep(0)
        assert len(held.held) == 2  # the schedule's commit, then the cancel's
        for future in held.held if fails_first == "schedule" else held.held[::-1]:
            future.set_exception(JournalError("disk full"))
        for call in (schedule, cancel):
            with pytest.raises(JournalError):
                await call
        held.release()
        assert engine.get("k") is None
        await clock.advance(2)
        assert fired == [] and engine.stats()["pending"] == 0


async def test_schedule_returns_the_timer_as_scheduled_even_if_it_fired_meanwhile(
    tmp_path: Path,
) -> None:
    clock = VirtualClock()
    engine = Engine(tmp_path / "t.db", clock=clock, durability="normal")

    def fail(firing: Firing) -> None:
        raise RuntimeError("down")

    engine.register("fail", fail, retry=RetryPolicy(initial=5.0, jitter=False))
    async with engine:
        assert engine.journal is not None
        held = HeldSubmits(engine.journal)
        call = asyncio.ensure_future(engine.schedule("fail", delay=0, key="k"))
        await asyncio.sleep(0)
        await clock.advance(0.01)  # due: its attempt is submitted behind the schedule record
        assert len(held.held) == 2
        for future in held.held:  # one group commit makes both durable
            future.set_result(None)
        info = await call
        assert (info.state, info.attempts, info.due) == (TimerState.PENDING, 0, clock.time() - 0.01)
        now = engine.get("k")
        assert now is not None and now.attempts == 1 and now.due > info.due  # it did fire
        held.release()


async def test_a_failed_batch_commit_leaves_nothing(tmp_path: Path) -> None:
    clock = VirtualClock()
    async with engine_with(tmp_path / "t.db", clock, []) as engine:
        assert engine.journal is not None
        disk = FailingSubmits(engine.journal)
        disk.failing = True
        with pytest.raises(JournalError):
            await engine.schedule_many(
                [
                    *[{"handler": "h", "delay": 10 + i} for i in range(5)],
                    {"handler": "h", "delay": 1, "key": "k"},
                ]
            )
        assert engine.timers() == [] and engine.stats()["pending"] == 0
        disk.failing = False
        again = await engine.schedule_many([{"handler": "h", "delay": 1, "key": "k"}])
    async with engine_with(tmp_path / "t.db", clock, []) as engine:
        assert engine.timers() == again


async def test_a_fresh_schedule_is_emitted_once_committed(tmp_path: Path) -> None:
    clock = VirtualClock()
    async with engine_with(tmp_path / "t.db", clock, []) as engine:
        assert engine.journal is not None
        events: list[str] = []
        engine.on_event(lambda event: events.append(f"{event.kind.value} {event.key}"))
        disk = FailingSubmits(engine.journal)
        disk.failing = True
        with pytest.raises(JournalError):
            await engine.schedule("h", delay=1, key="lost")
        with pytest.raises(JournalError):
            await engine.schedule_many([{"handler": "h", "delay": 1, "key": "lost2"}])
        disk.failing = False
        await engine.schedule("h", delay=1, key="one")
        await engine.schedule_many([{"handler": "h", "delay": 1, "key": "two"}])
        assert events == ["scheduled one", "scheduled two"]
        assert engine.get("lost") is None and engine.get("lost2") is None
