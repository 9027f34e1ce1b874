"""Attempts are committed just before their handlers start, in groups, never for a queued timer
(SPEC guarantee 5): what the journal holds while timers wait behind ``max_concurrency``, after
a crash, and what a queued timer is (PENDING: cancel and replace work on it)."""

from __future__ import annotations

import asyncio
import shutil
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from journal import Attempt, Cancel, Journal
from wheel_engine import CancelResult, Engine, Firing, RetryPolicy, TimerState
from wheel_engine.handlers import HandlerFn
from wheel_engine.testing import VirtualClock

KEYS = [f"k{i}" for i in range(10)]


async def attempts_in_journal(journal: Journal, keys: list[str]) -> Counter[str]:
    """Attempt records per key, read back from the journal file."""
    counts: Counter[str] = Counter()
    for key in keys:
        for _, record in await journal.history(key):
            if isinstance(record, Attempt):
                counts[key] += 1
    return counts


def crash_copy(db: Path, into: Path) -> Path:
    """What a SIGKILL leaves: the database file and its WAL as they are, no -shm, no close."""
    shutil.copyfile(db, into)
    wal = Path(f"{db}-wal")
    if wal.exists():
        shutil.copyfile(wal, f"{into}-wal")
    return into


def blocked_engine(
    db: Path, clock: VirtualClock, started: list[Firing], **options: object
) -> Engine:
    engine = Engine(db, clock=clock, durability="normal", max_concurrency=2, **options)  # type: ignore[arg-type]

    @engine.handler("h", retry=RetryPolicy(max_attempts=3, initial=0, jitter=False))
    async def hang(firing: Firing) -> None:
        started.append(firing)
        await asyncio.Event().wait()  # never returns: a slot stays taken until a crash or close

    return engine


async def test_only_started_attempts_are_committed(tmp_path: Path) -> None:
    clock = VirtualClock()
    started: list[Firing] = []
    engine = blocked_engine(tmp_path / "t.db", clock, started)
    await engine.start()
    try:
        await engine.schedule_many([{"handler": "h", "delay": 1, "key": key} for key in KEYS])
        await clock.advance(1)
        assert [f.key for f in started] == ["k0", "k1"]
        assert engine.journal is not None
        await engine.journal.flush()
        committed = await attempts_in_journal(engine.journal, KEYS)
        assert committed == Counter({"k0": 1, "k1": 1})  # not one for the eight queued ones
        queued = [engine.get(key) for key in KEYS[2:]]
        assert all(
            i is not None and (i.state, i.attempts) == (TimerState.PENDING, 0) for i in queued
        )
        stats = engine.stats()
        assert (stats["running"], stats["pending"]) == (2, 8)
    finally:
        await engine.close(grace=0)


async def test_a_crash_charges_only_the_attempts_that_started(tmp_path: Path) -> None:
    """Three crashes while eight timers wait behind two hung handlers: each crash charges the
    two that ran; no timer is charged, or goes DEAD, for an attempt it never made."""
    clock = VirtualClock()
    db = tmp_path / "t0.db"
    starts: Counter[str] = Counter()
    for crash in range(1, 4):
        started: list[Firing] = []
        engine = blocked_engine(db, clock, started)
        await engine.start()
        if crash == 1:
            await engine.schedule_many([{"handler": "h", "delay": 0, "key": key} for key in KEYS])
        await clock.advance(0.01)
        starts.update(f.key for f in started)
        assert engine.journal is not None
        await engine.journal.flush()
        db = crash_copy(db, tmp_path / f"t{crash}.db")  # the process dies here
        await engine.close(grace=0)  # (the original file is left behind, unused)
        journal = await Journal.open(db, readonly=True)
        try:
            rows = (await journal.recover()).timers
        finally:
            await journal.close()
        assert {key: rows[key].attempts for key in KEYS} == {key: starts[key] for key in KEYS}
    assert starts == Counter({"k0": 3, "k1": 3})
    rows_dead = [key for key in KEYS if rows[key].state == "DEAD"]
    assert rows_dead == []  # the last interrupted attempts are found at the next start


async def test_a_queued_timer_is_pending_and_cancel_is_final(tmp_path: Path) -> None:
    clock = VirtualClock()
    started: list[Firing] = []
    engine = blocked_engine(tmp_path / "t.db", clock, started)
    await engine.start()
    try:
        await engine.schedule_many([{"handler": "h", "delay": 1, "key": key} for key in KEYS[:4]])
        await clock.advance(1)
        assert await engine.cancel("k2") is CancelResult.CANCELED
        info = engine.get("k2")
        assert info is not None and (info.state, info.attempts) == (TimerState.CANCELED, 0)
        assert engine.stats()["pending"] == 1
        assert engine.journal is not None
        history = [type(record) for _, record in await engine.journal.history("k2")]
        assert history[-1] is Cancel and Attempt not in history
        await engine.cancel("k0")  # frees a slot (CANCEL_REQUESTED, the handler stops)
        await clock.settle()
        assert [f.key for f in started] == ["k0", "k1", "k3"]  # k2 left the queue for good
    finally:
        await engine.close(grace=0)


async def test_replacing_a_queued_timer_runs_only_the_new_version() -> None:
    clock = VirtualClock()
    engine = Engine(None, clock=clock, max_concurrency=1)
    release = asyncio.Event()
    ran: list[tuple[str, object]] = []

    @engine.handler("h")
    async def handler(firing: Firing) -> None:
        ran.append((firing.key, firing.payload))
        await release.wait()

    async with engine:
        await engine.schedule("h", delay=1, key="a")
        await engine.schedule("h", delay=1, key="b", payload="old")
        await clock.advance(1)
        new = await engine.schedule("h", delay=0, key="b", payload="new")
        assert engine.stats()["pending"] == 1
        release.set()
        await clock.advance(0.01)
        assert ran == [("a", None), ("b", "new")]
        info = engine.get("b")
        assert info is not None and info.version == new.version
        assert info.state is TimerState.SUCCEEDED


@pytest.mark.parametrize("durable", [False, True], ids=["in-memory", "journal"])
async def test_queued_timers_start_in_order_as_slots_free(tmp_path: Path, durable: bool) -> None:
    clock = VirtualClock()
    db = tmp_path / "t.db" if durable else None
    engine = Engine(db, clock=clock, durability="normal", max_concurrency=2)
    order: list[str] = []

    @engine.handler("h")
    async def handler(firing: Firing) -> None:
        order.append(firing.key)
        await clock.sleep(1)

    engine.register("plain", lambda firing: order.append(firing.key))
    async with engine:
        requests = [
            {"handler": "h", "delay": 1 + i * 0.01, "key": key} for i, key in enumerate(KEYS)
        ]
        requests.insert(3, {"handler": "plain", "delay": 1.025, "key": "p"})  # after k2
        await engine.schedule_many(requests)
        await clock.advance(20)
        assert order == [*KEYS[:3], "p", *KEYS[3:]]
        assert all(engine.get(key).attempts == 1 for key in KEYS)  # type: ignore[union-attr]
        if engine.journal is not None:
            await engine.journal.flush()
            assert await attempts_in_journal(engine.journal, KEYS) == Counter(
                dict.fromkeys(KEYS, 1)
            )


async def test_a_due_burst_keeps_group_commit(tmp_path: Path) -> None:
    """Attempts are committed per start group, not per timer: 2,048 plain and 640 async timers
    due at once take a few dozen commits (acks included), not 2,688."""
    clock = VirtualClock()
    engine = Engine(tmp_path / "t.db", clock=clock, durability="normal", max_concurrency=64)
    engine.register("plain", lambda firing: None)

    @engine.handler("async")
    async def handler(firing: Firing) -> None:
        pass

    async with engine:
        requests = [{"handler": "plain", "delay": 1, "key": f"p{i}"} for i in range(2048)]
        requests += [{"handler": "async", "delay": 1, "key": f"a{i}"} for i in range(640)]
        await engine.schedule_many(requests)
        assert engine.journal is not None
        commits: list[int] = []
        engine.journal.on_commit = lambda batch, seconds: commits.append(batch)
        await clock.advance(1)
        await engine.journal.flush()
        assert engine.stats()["succeeded"] == 2688
        assert sum(commits) == 2 * 2688  # an Attempt and an Ack each
        assert len(commits) <= 2 + 640 // 64 + 10  # two plain groups, ten async ones, acks


def dies_at(key: str, db: Path, into: Path, crashed: list[Path]) -> Callable[[Firing], None]:
    """A plain handler that "kills the process" when it runs ``key``: the copy of the journal
    taken at that instant is what a crash would leave (the group's attempts are committed,
    the acks of the handlers before it are not)."""

    def handle(firing: Firing) -> None:
        if firing.key == key and not crashed:
            crashed.append(crash_copy(db, into))

    return handle


async def crash_until_done(
    tmp_path: Path,
    poison: str,
    keys: list[str],
    handler: Callable[[str, Path, Path, list[Path]], HandlerFn],
    **options: Any,
) -> tuple[int, Engine]:
    """Run an engine on a journal until a run ends without the poison "killing the process";
    after each "crash" the next run starts on the copy the crash left. Returns the number of
    crashes and the last engine (started: the caller closes it)."""
    clock = VirtualClock()
    policy = RetryPolicy(max_attempts=3, initial=0, jitter=False)
    db = tmp_path / "t0.db"
    crashes = 0
    while True:
        crashed: list[Path] = []
        engine = Engine(db, clock=clock, durability="normal", **options)
        engine.register(
            "h", handler(poison, db, tmp_path / f"t{crashes + 1}.db", crashed), retry=policy
        )
        await engine.start()
        if crashes == 0:
            await engine.schedule_many([{"handler": "h", "delay": 0, "key": key} for key in keys])
        await clock.advance(0.01)
        if not crashed or crashes > 3:
            return crashes, engine
        crashes += 1
        await engine.close(grace=0)  # what is left of the dead process
        db = crashed[0]


async def assert_only_the_poison_dies(
    tmp_path: Path, handler: Callable[[str, Path, Path, list[Path]], HandlerFn], **options: Any
) -> None:
    keys = [f"p{i:02d}" for i in range(20)]
    crashes, engine = await crash_until_done(tmp_path, "p05", keys, handler, **options)
    try:
        assert crashes == 3  # the poison ran exactly max_attempts times
        states = {key: engine.get(key).state for key in keys}  # type: ignore[union-attr]
        assert states.pop("p05") is TimerState.DEAD
        assert set(states.values()) == {TimerState.SUCCEEDED}
    finally:
        await engine.close(grace=0)


async def test_a_plain_poison_timer_does_not_take_its_inline_group_down(tmp_path: Path) -> None:
    """Plain handlers start in groups whose attempts share a commit, so a plain handler that
    kills the process charges the rest of its group. A timer whose last attempt a crash cut
    short starts alone: the poison dies alone."""
    await assert_only_the_poison_dies(tmp_path, dies_at)


def async_dies_at(
    key: str, db: Path, into: Path, crashed: list[Path]
) -> Callable[[Firing], Awaitable[None]]:
    """:func:`dies_at` for an async handler: the crash lands in its first step, while the other
    handlers of its start group have been charged but may not have started yet."""

    async def handle(firing: Firing) -> None:
        if firing.key == key and not crashed:
            crashed.append(crash_copy(db, into))
            await asyncio.Event().wait()  # the process is dead: it never returns

    return handle


async def test_an_async_poison_timer_does_not_take_its_start_group_down(tmp_path: Path) -> None:
    """After a crash every interrupted timer starts alone, whatever its handler's kind, and the
    queue goes on only once its handler has run its first step: an async poison that kills the
    process at once is charged alone, never its group's partners (guarantee 5)."""
    await assert_only_the_poison_dies(tmp_path, async_dies_at, max_concurrency=4)
