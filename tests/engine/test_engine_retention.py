"""The retention window (SPEC guarantee 9): finished timers stay readable for ``retention``
seconds, at most ``max_retained`` of them, forgotten as timers finish (no tick needed), in
memory, in the journal's compaction and after a restart. DEAD timers are never forgotten."""

from __future__ import annotations

from pathlib import Path

from journal import Journal
from wheel_engine import CancelResult, Engine, Firing, PermanentError, TimerState
from wheel_engine.testing import VirtualClock


def engine_on(path: Path | None, clock: VirtualClock, **options: object) -> Engine:
    engine = Engine(path, clock=clock, durability="normal", **options)  # type: ignore[arg-type]
    engine.register("h", lambda firing: None)

    def poison(firing: Firing) -> None:
        raise PermanentError("no")

    engine.register("poison", poison)
    return engine


async def test_a_cancelled_timer_is_forgotten_at_once_with_retention_zero() -> None:
    clock = VirtualClock()
    async with engine_on(None, clock, retention=0.0) as engine:
        await engine.schedule("h", delay=100, key="live")
        await engine.schedule("h", delay=100, key="k")
        assert await engine.cancel("k") is CancelResult.CANCELED
        # No tick ran (the next due is 100 s away): it is gone already.
        assert engine.get("k") is None and "k" not in engine._table.timers
        assert await engine.cancel("k") is CancelResult.NOT_FOUND


async def test_max_retained_forgets_the_oldest_first_without_a_tick() -> None:
    clock = VirtualClock()
    async with engine_on(None, clock, max_retained=2) as engine:
        for i in range(4):
            await engine.schedule("h", delay=100, key=f"k{i}")
        for i in range(4):
            clock.jump(1)  # distinct finishing times; no tick runs
            await engine.cancel(f"k{i}")
        assert [engine.get(f"k{i}") is None for i in range(4)] == [True, True, False, False]
        assert len(engine._table.finished) == 2 and len(engine._table.timers) == 2


async def test_succeeded_timers_count_in_the_window_and_dead_ones_do_not() -> None:
    clock = VirtualClock()
    async with engine_on(None, clock, max_retained=1) as engine:
        await engine.schedule("poison", delay=1, key="dead")
        await engine.schedule_many(
            [{"handler": "h", "delay": 2, "key": f"ok{i}"} for i in range(3)]
        )
        await clock.advance(3)
        assert engine.get("dead").state is TimerState.DEAD  # type: ignore[union-attr]
        assert [engine.get(f"ok{i}") is None for i in range(3)] == [True, True, False]
        assert engine.stats()["dead"] == 1


async def test_reads_never_show_a_timer_past_its_retention() -> None:
    clock = VirtualClock()
    async with engine_on(None, clock, retention=10.0) as engine:
        await engine.schedule("h", delay=1, key="done")
        await clock.advance(2)
        assert engine.get("done").state is TimerState.SUCCEEDED  # type: ignore[union-attr]
        clock.jump(10)  # nothing ticks (the wheel is empty), yet it is past its retention
        assert engine.get("done") is None and engine.timers() == []
        assert await engine.cancel("done") is CancelResult.NOT_FOUND
        info = await engine.schedule("h", delay=1, key="done", on_conflict="error")
        assert info.state is TimerState.PENDING


async def test_the_window_survives_a_restart_and_a_compaction(tmp_path: Path) -> None:
    clock = VirtualClock()
    db = tmp_path / "t.db"
    async with engine_on(db, clock, max_retained=3) as engine:
        await engine.schedule("poison", delay=1, key="dead")
        await clock.advance(2)
        for i in range(6):
            await engine.schedule("h", delay=100, key=f"k{i}")
        for i in range(6):
            clock.jump(1)
            await engine.cancel(f"k{i}")
        kept = sorted(info.key for info in engine.timers())
        assert kept == ["dead", "k3", "k4", "k5"]
    async with engine_on(db, clock, max_retained=3) as engine:  # from the journal's tail
        assert sorted(info.key for info in engine.timers()) == kept
        await engine.compact()
    journal = await Journal.open(db, readonly=True)
    try:
        rows = (await journal.recover()).timers
    finally:
        await journal.close()
    assert sorted(rows) == kept  # the snapshot holds the window too, and the DEAD one
    async with engine_on(db, clock, max_retained=1) as engine:  # a smaller window at start
        assert sorted(info.key for info in engine.timers()) == ["dead", "k5"]


async def test_a_replaced_finished_timer_leaves_the_window() -> None:
    clock = VirtualClock()
    async with engine_on(None, clock, max_retained=1) as engine:
        await engine.schedule("h", delay=100, key="a")
        await engine.cancel("a")
        await engine.schedule("h", delay=100, key="a")  # "a" lives again
        await engine.schedule("h", delay=100, key="b")
        await engine.cancel("b")  # the window holds only "b": the live "a" is untouched
        assert engine.get("a").state is TimerState.PENDING  # type: ignore[union-attr]
        assert list(engine._table.finished) == ["b"]


async def test_a_key_finished_replaced_and_finished_again_counts_once(tmp_path: Path) -> None:
    clock = VirtualClock()
    db = tmp_path / "t.db"
    async with engine_on(db, clock, max_retained=2, retention=60.0) as engine:
        for key in ("a", "a", "b"):  # "a" finishes, is replaced, and finishes again
            await engine.schedule("h", delay=100, key=key)
            clock.jump(1)
            await engine.cancel(key)
        assert list(engine._table.finished) == ["a", "b"] and len(engine._table.finished) == 2
        a = engine.get("a")
        assert a is not None and a.version == 2
        await engine.schedule("h", delay=100, key="c")
        clock.jump(1)
        await engine.cancel("c")  # by count: "a" goes; its first version's entry is no one
        assert engine.get("a") is None and all(engine.get(k) for k in "bc")
    async with engine_on(db, clock, max_retained=2, retention=60.0) as engine:  # a restart
        assert list(engine._table.finished) == ["b", "c"]
        await engine.schedule("h", delay=59.5, key="tick")  # a tick then, which purges
        await clock.advance(59.5)  # "b" finished 60.5 s ago, "c" 59.5 s ago
        assert "b" not in engine._table.timers and list(engine._table.finished) == ["c", "tick"]
