"""The engine's recurring timers on a virtual clock, in memory and on a SQLite journal: the
series, catch_up after downtime, overlap, replace, cancel and bad input."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from wheel_engine import Engine
from wheel_engine.errors import UnknownHandler
from wheel_engine.model import CancelResult, Firing, TimerState
from wheel_engine.recurring.rule import occurrence_key
from wheel_engine.testing import VirtualClock

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z, VirtualClock's start


def make(path: Path | None, clock: VirtualClock, fired: list[str]) -> Engine:
    engine = Engine(path, clock=clock, clock_check=None)

    async def sweep(firing: Firing) -> None:
        fired.append(firing.key)

    engine.register("sweep", sweep)
    return engine


@pytest.fixture(params=["memory", "sqlite"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Path | None:
    return None if request.param == "memory" else tmp_path / "j.db"


async def test_every_fires_each_nominal_time_without_drift(where: Path | None) -> None:
    clock, fired = VirtualClock(), []
    engine = make(where, clock, fired)
    async with engine:
        info = await engine.schedule_recurring("s", "sweep", every=60)
        assert info.next_due == T0 + 60 and info.version >= 1
        assert engine.get(occurrence_key("s", T0 + 60)) is not None  # committed on return
        await clock.advance(60 * 5 + 1)
        assert fired == [occurrence_key("s", T0 + 60 * k) for k in range(1, 6)]
        assert fired[0] == "s@2026-01-01T00:01:00Z"
        done = engine.get(fired[0])
        assert done is not None and done.state is TimerState.SUCCEEDED
        (listed,) = await engine.recurrences()
        assert listed.name == "s" and listed.every == 60 and listed.next_due == T0 + 360


async def test_cron_in_a_zone(where: Path | None) -> None:
    clock, fired = VirtualClock(), []
    engine = make(where, clock, fired)
    async with engine:
        await engine.schedule_recurring("daily", "sweep", cron="30 2 * * *", tz="Europe/Berlin")
        await clock.advance(2 * 86400)
        assert fired == ["daily@2026-01-01T01:30:00Z", "daily@2026-01-02T01:30:00Z"]


async def test_cancel_stops_the_series_and_a_stale_cancel_touches_nothing(
    where: Path | None,
) -> None:
    clock, fired = VirtualClock(), []
    engine = make(where, clock, fired)
    async with engine:
        old = await engine.schedule_recurring("s", "sweep", every=10)
        new = await engine.schedule_recurring("s", "sweep", every=20)
        assert new.version > old.version
        assert not await engine.cancel_recurring("s", version=old.version)
        await clock.advance(41)
        assert fired == [occurrence_key("s", T0 + 20), occurrence_key("s", T0 + 40)]
        assert await engine.cancel_recurring("s", version=new.version)
        assert not await engine.cancel_recurring("s")
        await clock.advance(100)
        assert len(fired) == 2
        assert await engine.recurrences() == []


async def test_replace_replaces_the_pending_occurrence(where: Path | None) -> None:
    clock, fired = VirtualClock(), []
    engine = make(where, clock, fired)
    async with engine:
        await engine.schedule_recurring("s", "sweep", every=10, payload={"v": 1})
        await engine.schedule_recurring("s", "sweep", every=15, payload={"v": 2})
        old = engine.get(occurrence_key("s", T0 + 10))
        assert old is not None and old.state is TimerState.CANCELED
        await clock.advance(31)
        assert fired == [occurrence_key("s", T0 + 15), occurrence_key("s", T0 + 30)]
        assert engine.get(fired[0]).payload == {"v": 2}  # type: ignore[union-attr]


async def test_cancelling_one_occurrence_skips_it_only(where: Path | None) -> None:
    clock, fired = VirtualClock(), []
    engine = make(where, clock, fired)
    async with engine:
        await engine.schedule_recurring("s", "sweep", every=10)
        assert await engine.cancel(occurrence_key("s", T0 + 10)) is CancelResult.CANCELED
        await clock.advance(31)
        assert fired == [occurrence_key("s", T0 + 20), occurrence_key("s", T0 + 30)]


async def test_overlap_false_waits_for_the_predecessor(where: Path | None) -> None:
    clock = VirtualClock()
    engine = Engine(where, clock=clock, clock_check=None)
    log: list[tuple[str, str, float]] = []

    async def slow(firing: Firing) -> None:
        log.append(("start", firing.key, clock.time()))
        await clock.sleep(25)
        log.append(("end", firing.key, clock.time()))

    engine.register("slow", slow)
    async with engine:
        await engine.schedule_recurring("s", "slow", every=10)
        await clock.advance(60)
        starts = [(k, t) for what, k, t in log if what == "start"]
        ends = [t for what, _, t in log if what == "end"]
        assert starts[0] == (occurrence_key("s", T0 + 10), T0 + 10)
        assert starts[1] == (occurrence_key("s", T0 + 20), T0 + 35)  # waited for the first
        assert all(later >= end for (_, later), end in zip(starts[1:], ends, strict=False))
        await engine.close(grace=0)


@pytest.mark.parametrize(
    ("catch_up", "expected"),
    [
        ("latest", [T0 + 10, T0 + 50, T0 + 60]),
        ("all", [T0 + 10, T0 + 20, T0 + 30, T0 + 40, T0 + 50, T0 + 60]),
        ("skip", [T0 + 10, T0 + 60]),
    ],
)
async def test_catch_up_after_downtime(
    tmp_path: Path, catch_up: str, expected: list[float]
) -> None:
    clock, fired = VirtualClock(), []
    path = tmp_path / "j.db"
    engine = make(path, clock, fired)
    async with engine:
        await engine.schedule_recurring("s", "sweep", every=10, catch_up=catch_up)  # type: ignore[arg-type]
        await clock.advance(10)
    assert fired == [occurrence_key("s", T0 + 10)]
    await clock.advance(45)  # down from T0+10 to T0+55: 20, 30, 40 and 50 were missed
    engine = make(path, clock, fired)
    async with engine:
        await clock.advance(0)
        await asyncio.sleep(0)
        await clock.advance(6)
    assert fired == [occurrence_key("s", t) for t in expected]


async def test_the_series_survives_a_restart(tmp_path: Path) -> None:
    clock, fired = VirtualClock(), []
    path = tmp_path / "j.db"
    async with make(path, clock, fired) as engine:
        await engine.schedule_recurring("s", "sweep", every=10)
    engine = make(path, clock, fired)
    async with engine:
        (info,) = await engine.recurrences()
        assert info.next_due == T0 + 10
        await clock.advance(21)
    assert fired == [occurrence_key("s", T0 + 10), occurrence_key("s", T0 + 20)]


async def test_bad_input_raises_before_anything_changes(where: Path | None) -> None:
    clock = VirtualClock()
    engine = make(where, clock, [])
    async with engine:
        bad = [
            ({"cron": "* * * * *", "every": 5}, TypeError),
            ({}, TypeError),
            ({"every": 0}, ValueError),
            ({"every": -1}, ValueError),
            ({"cron": "61 * * * *"}, ValueError),
            ({"cron": "* * * * *", "tz": "Mars/Olympus"}, ValueError),
            ({"every": 5, "start": __import__("datetime").datetime(2026, 1, 2)}, ValueError),
            ({"every": 5, "catch_up": "some"}, ValueError),
        ]
        for fields, error in bad:
            with pytest.raises(error):
                await engine.schedule_recurring("s", "sweep", **fields)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="minute"):
            await engine.schedule_recurring("s", "sweep", cron="61 * * * *")
        with pytest.raises(UnknownHandler):
            await engine.schedule_recurring("s", "nope", every=5)
        for name in ("a@b", ""):
            with pytest.raises(ValueError):
                await engine.schedule_recurring(name, "sweep", every=5)
        assert engine.timers() == [] and await engine.recurrences() == []


async def test_events_for_scheduled_and_canceled_recurrences(where: Path | None) -> None:
    clock = VirtualClock()
    engine = make(where, clock, [])
    seen: list[tuple[str, str, int]] = []
    engine.on_event(lambda e: seen.append((e.kind.value, e.key, e.version)))
    async with engine:
        info = await engine.schedule_recurring("s", "sweep", every=10)
        assert await engine.cancel_recurring("s")
    mine = [event for event in seen if event[1] == "s"]
    assert mine == [
        ("recurrence_scheduled", "s", info.version),
        ("recurrence_canceled", "s", info.version),
    ]


@pytest.mark.parametrize("name", ["recurring:sweep", "recurring:", "wheel-engine:recurrence"])
def test_a_user_cannot_register_a_handler_name_the_engine_derives(name: str) -> None:
    """Registered by a user, ``recurring:sweep`` would replace the handler the occurrences of
    a recurrence of ``sweep`` run under, so the series would stop: refused, nothing changed."""
    engine = Engine(None)
    engine.register("sweep", lambda firing: None)
    derived = engine._handlers["recurring:sweep"]
    with pytest.raises(ValueError, match="reserved"):
        engine.register(name, lambda firing: None, concurrency=1)
    assert engine._handlers["recurring:sweep"] is derived
    assert name not in engine._dispatcher.limits.gates
