"""schedule / schedule_many / get on the in-memory engine, driven by the virtual clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from wheel_engine import DuplicateKey, Engine, EngineError, Firing, TimerState, UnknownHandler
from wheel_engine.testing import VirtualClock


def recording_engine(clock: VirtualClock, **options: object) -> tuple[Engine, list[Firing]]:
    engine = Engine(None, clock=clock, **options)  # type: ignore[arg-type]
    fired: list[Firing] = []

    @engine.handler("h")
    async def handle(firing: Firing) -> None:
        fired.append(firing)

    return engine, fired


async def test_fires_at_due_time_not_before() -> None:
    clock = VirtualClock()
    engine, fired = recording_engine(clock)
    async with engine:
        info = await engine.schedule("h", delay=10, payload={"n": 1}, key="k")
        assert info.state is TimerState.PENDING and info.version >= 1
        await clock.advance(9.99)
        assert fired == []
        await clock.advance(0.02)
        assert [f.key for f in fired] == ["k"]
        firing = fired[0]
        assert firing.payload == {"n": 1}
        assert firing.fired_at >= firing.due == info.due
        assert firing.attempt == 1
        assert firing.idempotency_key == f"k#{info.version}"
        assert engine.get("k").state is TimerState.SUCCEEDED  # type: ignore[union-attr]


async def test_at_accepts_aware_datetime_and_epoch() -> None:
    clock = VirtualClock()
    engine, fired = recording_engine(clock)
    async with engine:
        when = datetime.fromtimestamp(clock.time(), UTC) + timedelta(seconds=5)
        a = await engine.schedule("h", at=when, key="dt")
        b = await engine.schedule("h", at=clock.time() + 3, key="epoch")
        assert a.due == pytest.approx(clock.time() + 5)
        await clock.advance(6)
        assert [f.key for f in fired] == ["epoch", "dt"]
        assert b.due < a.due


async def test_order_is_due_then_version() -> None:
    clock = VirtualClock()
    engine, fired = recording_engine(clock, tick=0.001)
    async with engine:
        base = clock.time()
        for i, offset in enumerate([5.0, 1.0, 3.0, 1.0, 2.0, 5.0]):
            await engine.schedule("h", at=base + offset, key=f"k{i}")
        await clock.advance(10)
        assert [f.key for f in fired] == ["k1", "k3", "k4", "k2", "k0", "k5"]


async def test_overdue_timers_fire_at_once() -> None:
    clock = VirtualClock()
    engine, fired = recording_engine(clock)
    async with engine:
        await engine.schedule("h", at=clock.time() - 100, key="late")
        await engine.schedule("h", delay=0, key="now")
        await clock.advance(0.002)
        assert [f.key for f in fired] == ["late", "now"]


async def test_versions_strictly_increase_and_keys_are_unique() -> None:
    clock = VirtualClock()
    engine, _ = recording_engine(clock)
    async with engine:
        infos = [await engine.schedule("h", delay=1) for _ in range(50)]
        versions = [i.version for i in infos]
        assert versions == sorted(set(versions))
        assert len({i.key for i in infos}) == 50


async def test_replace_keep_error() -> None:
    clock = VirtualClock()
    engine, fired = recording_engine(clock)
    async with engine:
        first = await engine.schedule("h", delay=10, key="k", payload=1)
        kept = await engine.schedule("h", delay=20, key="k", payload=2, on_conflict="keep")
        assert kept == first
        with pytest.raises(DuplicateKey):
            await engine.schedule("h", delay=20, key="k", on_conflict="error")
        replaced = await engine.schedule("h", delay=20, key="k", payload=3)
        assert replaced.version > first.version and replaced.payload == 3
        await clock.advance(15)
        assert fired == []  # the replaced version does not fire at its old time
        await clock.advance(10)
        assert [(f.key, f.version, f.payload) for f in fired] == [("k", replaced.version, 3)]


async def test_finished_key_is_simply_scheduled_again() -> None:
    clock = VirtualClock()
    engine, fired = recording_engine(clock)
    async with engine:
        await engine.schedule("h", delay=1, key="k")
        await clock.advance(2)
        again = await engine.schedule("h", delay=1, key="k", on_conflict="error")
        assert again.state is TimerState.PENDING
        await clock.advance(2)
        assert len(fired) == 2


async def test_schedule_many_validates_all_first() -> None:
    clock = VirtualClock()
    engine, fired = recording_engine(clock)
    async with engine:
        infos = await engine.schedule_many(
            [{"handler": "h", "delay": 2, "key": "a"}, {"handler": "h", "delay": 1, "key": "b"}]
        )
        assert [i.key for i in infos] == ["a", "b"]
        with pytest.raises(UnknownHandler):
            await engine.schedule_many(
                [{"handler": "h", "delay": 1, "key": "c"}, {"handler": "nope", "delay": 1}]
            )
        assert engine.get("c") is None
        await clock.advance(3)
        assert [f.key for f in fired] == ["b", "a"]


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"handler": "nope", "delay": 1}, UnknownHandler),
        ({"handler": "h"}, ValueError),
        ({"handler": "h", "delay": 1, "at": 5.0}, ValueError),
        ({"handler": "h", "delay": -1}, ValueError),
        ({"handler": "h", "delay": float("nan")}, ValueError),
        ({"handler": "h", "delay": float("inf")}, ValueError),
        ({"handler": "h", "at": -5.0}, ValueError),
        ({"handler": "h", "at": datetime(2030, 1, 1)}, ValueError),
        ({"handler": "h", "delay": 1, "payload": object()}, TypeError),
        ({"handler": "h", "delay": 1, "payload": "x" * 70_000}, ValueError),
        ({"handler": "h", "delay": 1, "key": ""}, ValueError),
        ({"handler": "h", "delay": 1, "on_conflict": "merge"}, ValueError),
    ],
)
async def test_bad_input_is_rejected_before_anything_changes(
    kwargs: dict[str, object], error: type[Exception]
) -> None:
    clock = VirtualClock()
    engine, _ = recording_engine(clock)
    async with engine:
        await engine.schedule("h", delay=5, key="existing", payload=1)
        handler = kwargs.pop("handler")
        with pytest.raises(error):
            await engine.schedule(handler, key=kwargs.pop("key", "existing"), **kwargs)  # type: ignore[arg-type]
        info = engine.get("existing")
        assert info is not None and info.payload == 1 and info.state is TimerState.PENDING
        assert engine.stats()["pending"] == 1


async def test_not_started_and_closed_engines_refuse_work() -> None:
    clock = VirtualClock()
    engine, _ = recording_engine(clock)
    with pytest.raises(EngineError):
        await engine.schedule("h", delay=1)
    async with engine:
        pass
    with pytest.raises(EngineError):
        await engine.schedule("h", delay=1)


async def test_sync_and_thread_handlers() -> None:
    clock = VirtualClock()
    engine = Engine(None, clock=clock)
    calls: list[str] = []
    engine.register("inline", lambda f: calls.append(f"inline:{f.key}"))
    engine.register("thread", lambda f: calls.append(f"thread:{f.key}"), thread=True)
    async with engine:
        await engine.schedule("inline", delay=1, key="a")
        await engine.schedule("thread", delay=2, key="b")
        await clock.advance(3)
        assert calls == ["inline:a", "thread:b"]
        assert engine.get("b").state is TimerState.SUCCEEDED  # type: ignore[union-attr]


async def test_idle_engine_keeps_at_most_one_clock_callback() -> None:
    clock = VirtualClock()
    engine, _ = recording_engine(clock, clock_check=None)
    async with engine:
        await clock.advance(1)
        assert clock.armed() == 0  # nothing scheduled: nothing armed
        for i in range(100):
            await engine.schedule("h", delay=100 + i)
        assert clock.armed() == 1
        assert clock.next_deadline() == pytest.approx(clock.time() + 100, abs=0.002)


async def test_wall_clock_set_back_never_fires_early() -> None:
    clock = VirtualClock()
    engine, fired = recording_engine(clock)
    async with engine:
        info = await engine.schedule("h", delay=10, key="k")
        clock.jump(-5)  # an administrator sets the wall clock back 5 s
        await clock.advance(10)  # the loop's timer fires, but by the wall it is not due
        assert fired == []
        await clock.advance(5)
        assert len(fired) == 1 and fired[0].fired_at >= info.due


async def test_wall_clock_set_forward_fires_what_became_due() -> None:
    clock = VirtualClock()
    engine, fired = recording_engine(clock, clock_check=1.0)
    async with engine:
        await engine.schedule("h", delay=3600, key="k")
        clock.jump(3600)
        await clock.advance(1.0)
        assert [f.key for f in fired] == ["k"]


async def test_unhandled_timer_is_kept_and_fires_once_registered() -> None:
    clock = VirtualClock()
    engine, fired = recording_engine(clock)
    async with engine:
        await engine.schedule("h", delay=1, key="k")
        # Simulate a handler known at schedule time but missing at fire time (as after a
        # restart with a journal): drop the registration.
        spec = engine._handlers.pop("h")
        await clock.advance(2)
        assert fired == [] and engine.stats()["unhandled"] == 1
        assert engine.get("k").state is TimerState.PENDING  # type: ignore[union-attr]
        engine.register("h", spec.fn)
        await clock.advance(0.01)
        assert [f.key for f in fired] == ["k"] and engine.stats()["unhandled"] == 0


async def test_schedule_many_conflicts_reject_the_whole_batch() -> None:
    clock = VirtualClock()
    engine, _ = recording_engine(clock)
    async with engine:
        await engine.schedule("h", delay=5, key="live")
        with pytest.raises(DuplicateKey):
            await engine.schedule_many(
                [
                    {"handler": "h", "delay": 1, "key": "new"},
                    {"handler": "h", "delay": 1, "key": "live", "on_conflict": "error"},
                ]
            )
        with pytest.raises(DuplicateKey):
            await engine.schedule_many(
                [
                    {"handler": "h", "delay": 1, "key": "twice"},
                    {"handler": "h", "delay": 1, "key": "twice", "on_conflict": "error"},
                ]
            )
        with pytest.raises(TypeError):
            await engine.schedule_many([{"handler": "h", "delay": 1, "when": 3}])
        assert engine.get("new") is None and engine.get("twice") is None
        assert engine.stats()["pending"] == 1
