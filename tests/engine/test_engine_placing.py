"""The one placing step (``Scheduler._place``): whichever path makes a new version (a schedule
on its fast or general path, one or a batch; a redrive), the timer goes into the wheel at its
due and the clock is armed for it if it is now the earliest; a redriven timer whose handler is
not registered waits parked instead."""

from __future__ import annotations

from pathlib import Path

import pytest

from wheel_engine import Engine, Firing, RetryPolicy, TimerState
from wheel_engine.testing import VirtualClock

#: The ways a new version is placed, each with what it makes due at once.
PATHS = ("schedule new key", "schedule replace", "many new keys", "many replace", "redrive")


def _engine(path: Path | None, clock: VirtualClock, fired: list[str]) -> Engine:
    engine = Engine(path, clock=clock, durability="normal")

    @engine.handler("h")
    async def handle(firing: Firing) -> None:
        fired.append(firing.key)

    @engine.handler("fails", retry=RetryPolicy(max_attempts=1))
    async def fail(firing: Firing) -> None:
        fired.append(firing.key)
        raise RuntimeError("down")

    return engine


def _in_memory() -> tuple[Engine, VirtualClock, list[str]]:
    """An in-memory :func:`_engine`, its clock and the keys it fires."""
    clock = VirtualClock()
    fired: list[str] = []
    return _engine(None, clock, fired), clock, fired


async def _place(engine: Engine, how: str, due: float) -> list[str]:
    """Place timers due at ``due`` the way ``how`` says; the keys placed."""
    if how == "schedule new key":
        await engine.schedule("h", at=due, key="new")
        return ["new"]
    if how == "schedule replace":
        await engine.schedule("h", at=due, key="k")
        return ["k"]
    if how == "many new keys":
        await engine.schedule_many([{"handler": "h", "at": due + i / 10} for i in (3, 2, 1)])
        return []  # engine-made keys: counted below instead
    if how == "many replace":
        await engine.schedule_many(
            [{"handler": "h", "at": due, "key": "k"}, {"handler": "h", "at": due, "key": "other"}]
        )
        return ["k", "other"]
    await engine.redrive("dead", at=due)
    return ["dead"]


@pytest.mark.parametrize("durable", [False, True], ids=["memory", "sqlite"])
@pytest.mark.parametrize("how", PATHS)
async def test_a_placed_timer_earlier_than_the_armed_one_fires_at_its_due(
    how: str, durable: bool, tmp_path: Path
) -> None:
    clock = VirtualClock()
    fired: list[str] = []
    engine = _engine(tmp_path / "t.db" if durable else None, clock, fired)
    async with engine:
        await engine.schedule("fails", delay=0, key="dead")
        await clock.advance(0.5)
        assert engine.get("dead").state is TimerState.DEAD  # type: ignore[union-attr]
        await engine.schedule("h", delay=50, key="k")  # the clock is armed for these two
        await engine.schedule("h", delay=100, key="later")
        fired.clear()
        keys = await _place(engine, how, clock.time() + 1)
        await clock.advance(1.5)
        if keys:
            assert sorted(fired) == sorted(keys)
        else:
            assert len(fired) == 3 and not {"k", "later"} & set(fired)
        await clock.advance(100)
        assert "later" in fired


async def test_a_redriven_timer_whose_handler_is_gone_waits_parked_until_registered() -> None:
    engine, clock, fired = _in_memory()
    async with engine:
        await engine.schedule("fails", delay=0, key="dead")
        await clock.advance(0.5)
        assert fired == ["dead"]
        spec = engine._handlers.pop("fails")  # as after a restart without its registration
        again = await engine.redrive("dead", at=clock.time() + 1)
        assert engine.stats()["unhandled"] == 1  # parked at once, not in the wheel
        await clock.advance(2)
        assert fired == ["dead"] and engine.stats()["unhandled"] == 1
        assert engine.get("dead").state is TimerState.PENDING  # type: ignore[union-attr]
        engine.register("fails", spec.fn)
        await clock.advance(0.01)
        assert fired == ["dead", "dead"] and engine.stats()["unhandled"] == 0
        assert engine.get("dead").version == again.version  # type: ignore[union-attr]


async def test_a_schedule_replacing_a_parked_timer_of_a_gone_handler_fires() -> None:
    engine, clock, fired = _in_memory()
    async with engine:
        await engine.schedule("fails", delay=1, key="k")
        engine._handlers.pop("fails")
        await clock.advance(2)
        assert engine.stats()["unhandled"] == 1  # parked: its handler is gone
        await engine.schedule("h", delay=1, key="k")  # replaced by one whose handler is here
        assert engine.stats()["unhandled"] == 0
        await clock.advance(2)
        assert fired == ["k"]
