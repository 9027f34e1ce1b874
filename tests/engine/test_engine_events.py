"""engine.on_event (SPEC): which change emits which event, with which fields, in which order.

The bus itself (``wheel_engine/events.py``) is tested on its own in ``tests/test_events.py``.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from wheel_engine import CancelResult, Engine, Firing, PermanentError, RetryPolicy
from wheel_engine.events import Event, EventKind
from wheel_engine.testing import VirtualClock

S, F, OK, R, D, C, RD = (
    EventKind.SCHEDULED,
    EventKind.FIRED,
    EventKind.SUCCEEDED,
    EventKind.RETRY,
    EventKind.DEAD,
    EventKind.CANCELED,
    EventKind.REDRIVEN,
)
NO_WAIT = RetryPolicy(max_attempts=3, initial=1.0, multiplier=1.0, jitter=False)


def kinds(events: list[Event], key: str | None = None) -> list[EventKind]:
    return [e.kind for e in events if key is None or e.key == key]


def watched(engine: Engine) -> list[Event]:
    seen: list[Event] = []
    engine.on_event(seen.append)
    return seen


@pytest.fixture(params=["memory", "journal"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str | None:
    return None if request.param == "memory" else str(tmp_path / "t.db")


async def test_a_timer_that_succeeds(db: str | None) -> None:
    clock = VirtualClock()
    engine = Engine(db, clock=clock)
    seen = watched(engine)

    @engine.handler("h")
    async def h(firing: Firing) -> None:
        await clock.sleep(2)  # the handler runs two (virtual) seconds

    async with engine:
        t0 = clock.time()
        info = await engine.schedule("h", delay=5, key="a", payload={"secret": 1})
        assert seen == [(S, "a", info.version, "h", t0 + 5, t0, None, 0, None, None)]
        await clock.advance(5.5)
        await clock.advance(2)
    fired, done = seen[1], seen[2]
    assert (fired.kind, fired.attempt, fired.due) == (F, 1, t0 + 5)
    assert fired.lateness is not None and 0 <= fired.lateness == fired.at - fired.due <= 0.51
    assert (done.kind, done.attempt, done.error) == (OK, 1, None)
    assert done.duration == pytest.approx(2.0) and done.at == pytest.approx(fired.at + 2)
    assert "secret" not in repr(seen)


async def test_plain_handlers_get_their_own_duration(db: str | None) -> None:
    clock = VirtualClock()
    engine = Engine(db, clock=clock)
    seen = watched(engine)
    engine.register("plain", lambda firing: clock.jump(0.25))  # "runs" a quarter of a second
    async with engine:
        await engine.schedule_many([{"handler": "plain", "delay": 1, "key": k} for k in "xy"])
        await clock.advance(1)
    assert kinds(seen) == [S, S, F, F, OK, OK] or kinds(seen) == [S, S, F, OK, F, OK]
    assert [e.duration for e in seen if e.kind is OK] == pytest.approx([0.25, 0.25])


async def test_replace_is_one_scheduled_event_and_keep_is_none(db: str | None) -> None:
    clock = VirtualClock()
    engine = Engine(db, clock=clock)
    seen = watched(engine)
    engine.register("h", lambda firing: None)
    async with engine:
        first = await engine.schedule("h", delay=10, key="a")
        second = await engine.schedule("h", delay=20, key="a")
        await engine.schedule("h", delay=30, key="a", on_conflict="keep")
    assert [(e.kind, e.version) for e in seen] == [(S, first.version), (S, second.version)]


async def test_retries_then_dead_with_the_error(db: str | None) -> None:
    clock = VirtualClock()
    engine = Engine(db, clock=clock)
    seen = watched(engine)

    @engine.handler("flaky", retry=NO_WAIT)
    def flaky(firing: Firing) -> None:
        raise ValueError("downstream said no")

    async with engine:
        await engine.schedule("flaky", delay=1, key="f")
        await clock.advance(1)
        retry = seen[-1]
        assert kinds(seen) == [S, F, R]
        assert (retry.attempt, retry.due) == (1, pytest.approx(retry.at + 1.0))
        assert retry.error is not None and "downstream said no" in retry.error
        assert retry.duration is not None
        await clock.advance(1)
        await clock.advance(1)
    assert kinds(seen) == [S, F, R, F, R, F, D]
    assert seen[-1].attempt == 3 and "downstream said no" in (seen[-1].error or "")


async def test_permanent_error_and_deadline_are_dead_at_once(db: str | None) -> None:
    clock = VirtualClock()
    engine = Engine(db, clock=clock)
    seen = watched(engine)

    @engine.handler("perm")
    async def perm(firing: Firing) -> None:
        raise PermanentError("bad order")

    @engine.handler("late", retry=RetryPolicy(max_attempts=9, initial=5, deadline=1, jitter=False))
    async def late(firing: Firing) -> None:
        raise ValueError("slow")

    async with engine:
        await engine.schedule("perm", delay=1, key="p")
        await engine.schedule("late", delay=1, key="l")
        await clock.advance(1)
    assert kinds(seen, "p") == [S, F, D] and kinds(seen, "l") == [S, F, D]
    assert all(e.duration is not None for e in seen if e.kind is D)


async def test_an_interrupted_last_attempt_is_dead_without_a_duration(tmp_path: Path) -> None:
    clock = VirtualClock()
    db = tmp_path / "t.db"
    engine = Engine(str(db), clock=clock, durability="normal")

    @engine.handler("h", retry=RetryPolicy(max_attempts=1))
    async def hang(firing: Firing) -> None:
        await asyncio.Event().wait()

    async with engine:
        await engine.schedule("h", delay=0, key="k")
        await clock.advance(0.01)
        assert engine.journal is not None
        await engine.journal.flush()
        shutil.copyfile(db, tmp_path / "crashed.db")  # what a SIGKILL leaves now
        shutil.copyfile(f"{db}-wal", tmp_path / "crashed.db-wal")
        await engine.close(grace=0)
    engine = Engine(str(tmp_path / "crashed.db"), clock=clock)
    seen = watched(engine)
    engine.register("h", lambda firing: None, retry=RetryPolicy(max_attempts=1))
    async with engine:
        await clock.advance(0.01)
    assert kinds(seen) == [D]  # recovery itself emits nothing
    assert seen[0].duration is None and "interrupted" in (seen[0].error or "")


async def test_cancel_of_pending_queued_and_running_timers(db: str | None) -> None:
    clock = VirtualClock()
    engine = Engine(db, clock=clock, max_concurrency=1)
    seen = watched(engine)

    @engine.handler("slow")
    async def slow(firing: Firing) -> None:
        await clock.sleep(100)

    async with engine:
        await engine.schedule("slow", delay=50, key="pending")
        await engine.schedule("slow", delay=1, key="running")
        await engine.schedule("slow", delay=1, key="queued")  # behind max_concurrency=1
        await clock.advance(1)
        assert await engine.cancel("pending") is CancelResult.CANCELED
        assert await engine.cancel("queued") is CancelResult.CANCELED
        assert kinds(seen, "pending") == [S, C] and kinds(seen, "queued") == [S, C]
        assert await engine.cancel("running") is CancelResult.CANCEL_REQUESTED
        assert kinds(seen, "running") == [S, F]  # not canceled until the attempt has ended
        await clock.advance(0.5)
    assert kinds(seen, "running") == [S, F, C]
    ended = seen[-1]
    assert ended.duration == pytest.approx(0.0, abs=1e-6) and ended.attempt == 1
    assert [e.duration for e in seen if e.key != "running" and e.kind is C] == [None, None]


async def test_redrive_is_a_new_version(db: str | None) -> None:
    clock = VirtualClock()
    engine = Engine(db, clock=clock)
    seen = watched(engine)

    @engine.handler("perm")
    def perm(firing: Firing) -> None:
        raise PermanentError("no")

    async with engine:
        dead = await engine.schedule("perm", delay=1, key="d")
        await clock.advance(1)
        fresh = await engine.redrive("d", at=clock.time() + 10)
    redriven = seen[-1]
    assert kinds(seen) == [S, F, D, RD]
    assert (redriven.version, redriven.due, redriven.attempt) == (fresh.version, fresh.due, 0)
    assert fresh.version > dead.version


async def test_a_raising_callback_breaks_neither_the_engine_nor_other_subscribers(
    db: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    clock = VirtualClock()
    engine = Engine(db, clock=clock)

    def broken(event: Event) -> None:
        raise RuntimeError("hook down")

    engine.on_event(broken)
    seen = watched(engine)
    engine.register("h", lambda firing: None)
    async with engine:
        await engine.schedule_many([{"handler": "h", "delay": 1} for _ in range(3)])
        await clock.advance(1)
        assert engine.stats()["succeeded"] == 3
    assert kinds(seen).count(OK) == 3
    assert len([r for r in caplog.records if r.name == "wheel_engine.events"]) == 1


async def test_unsubscribed_means_no_more_events() -> None:
    clock = VirtualClock()
    engine = Engine(None, clock=clock)
    seen: list[Event] = []
    stop = engine.on_event(seen.append)
    engine.register("h", lambda firing: None)
    async with engine:
        await engine.schedule("h", delay=1)
        stop()
        await clock.advance(1)
    assert kinds(seen) == [S]


async def test_a_timer_due_at_once_is_scheduled_before_it_fires(db: str | None) -> None:
    """The scheduled event waits for the commit; the firing's attempt commits after it."""
    clock = VirtualClock()
    engine = Engine(db, clock=clock)
    seen = watched(engine)
    engine.register("h", lambda firing: None)

    @engine.handler("a")
    async def a(firing: Firing) -> None:
        await asyncio.sleep(0)

    async with engine:
        await asyncio.gather(
            *(engine.schedule(name, delay=0, key=f"{name}{n}") for n in range(20) for name in "ha")
        )
        await clock.advance(0.01)
    for n in range(20):
        for name in "ha":
            assert kinds(seen, f"{name}{n}") == [S, F, OK]
