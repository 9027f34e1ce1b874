"""The fast paths of ``schedule()`` and ``schedule_many()`` (:mod:`wheel_engine.scheduling`):
what they do is what the general path does, failures are undone, and a waiting ``schedule()``
keeps few objects alive for the cyclic collector. The general path's own tests are
``test_engine_schedule.py``; the fast paths' failures (injected at the journal) are tested in
``tests/durability/test_engine_journal_failures.py``."""

from __future__ import annotations

import asyncio
import collections
import gc
import sys
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

import wheel_engine
from journal import JournalError
from wheel_engine import DuplicateKey, Engine, Firing, UnknownHandler
from wheel_engine.testing import VirtualClock


def durable(path: Path, clock: VirtualClock, fired: list[Firing] | None = None) -> Engine:
    engine = Engine(path, clock=clock, durability="normal")

    @engine.handler("h")
    async def handle(firing: Firing) -> None:
        if fired is not None:
            fired.append(firing)

    return engine


def batch(n: int, **extra: Any) -> list[dict[str, Any]]:
    return [{"handler": "h", "delay": 10 + i, **extra} for i in range(n)]


async def test_a_batch_of_new_keys_is_committed_and_fires_after_a_restart(tmp_path: Path) -> None:
    clock = VirtualClock()
    requests = [{"handler": "h", "delay": 5 + i, "key": f"k{i}", "payload": [i]} for i in range(3)]
    async with durable(tmp_path / "t.db", clock) as engine:
        infos = await engine.schedule_many([*requests, *batch(2)])
    versions = [info.version for info in infos]
    assert versions == sorted(set(versions))  # one counter, in request order
    assert [info.key for info in infos[:3]] == ["k0", "k1", "k2"]
    assert len({info.key for info in infos}) == 5
    fired: list[Firing] = []
    async with durable(tmp_path / "t.db", clock, fired) as engine:
        assert [engine.get(info.key) for info in infos] == infos
        await clock.advance(20)
    assert sorted((f.key, f.version, f.payload) for f in fired) == sorted(
        (info.key, info.version, info.payload) for info in infos
    )


@pytest.mark.parametrize(
    "bad",
    [
        {"handler": "nope", "delay": 1},
        {"handler": "h", "delay": -1},
        {"handler": "h", "delay": 1, "payload": object()},
        {"handler": "h", "delay": 1, "key": ""},
        {"handler": "h", "delay": 1, "when": 3},
        ("h", 1),
    ],
)
async def test_bad_input_late_in_a_batch_changes_nothing(tmp_path: Path, bad: Any) -> None:
    clock = VirtualClock()
    async with durable(tmp_path / "t.db", clock) as engine:
        first = await engine.schedule("h", delay=1)
        with pytest.raises((TypeError, ValueError, UnknownHandler)):
            await engine.schedule_many([*batch(3), bad])
        assert engine.timers() == [first]
        after = await engine.schedule("h", delay=1)
        assert after.version == first.version + 1  # no version was used up


async def test_unusual_batches_take_the_general_path(tmp_path: Path) -> None:
    clock = VirtualClock()
    async with durable(tmp_path / "t.db", clock) as engine:
        old = await engine.schedule("h", delay=5, key="a", payload="old")
        infos = await engine.schedule_many(
            [
                {"handler": "h", "delay": 1, "key": "new"},
                {"handler": "h", "delay": 2, "key": "a", "payload": "replaced"},  # a live key
                {"handler": "h", "delay": 3, "key": "twice"},
                {"handler": "h", "delay": 4, "key": "twice"},  # given twice: the last wins
            ]
        )
        kept = await engine.schedule_many(
            [{"handler": "h", "delay": 9, "key": "a", "on_conflict": "keep"}]
        )
        with pytest.raises(DuplicateKey):
            await engine.schedule_many(
                [{"handler": "h", "delay": 9, "key": "a", "on_conflict": "error"}]
            )
    assert infos[1].payload == "replaced" and infos[1].version > old.version
    assert kept == [infos[1]]
    async with durable(tmp_path / "t.db", clock) as engine:
        assert engine.get("twice") == infos[3]
        assert {info.key for info in engine.timers()} == {"a", "new", "twice"}


async def test_in_memory_batches_and_single_schedules_take_the_same_paths() -> None:
    clock = VirtualClock()
    engine = Engine(None, clock=clock)
    fired: list[str] = []
    engine.register("h", lambda firing: fired.append(firing.key))
    events: list[str] = []
    async with engine:
        engine.on_event(lambda event: events.append(f"{event.kind.value} {event.key}"))
        await engine.schedule_many([{"handler": "h", "delay": 1, "key": "m"}])
        await engine.schedule("h", delay=2, key="s")
        await clock.advance(3)
    assert fired == ["m", "s"]
    assert events[:2] == ["scheduled m", "scheduled s"]


async def test_a_waiting_schedule_keeps_few_objects_alive(tmp_path: Path) -> None:
    """Each awaited ``schedule()`` keeps its objects alive until its commit is done; every one
    the cyclic collector tracks adds to its work (it ran every ~700 of them and took over half
    the time of 10,000 concurrent calls). asyncio's own share (the task, its context, a weak
    reference, a bound method, the coroutine and the await's iterator) is 6; main's code before
    the fast path kept 23 (four coroutines, three lists, two cells...), until the coroutine
    held the timer and its commit itself 10 (a tuple of them, too), and until the writer kept
    kinds and bodies in two lists 9 (a tuple per row). Now 8: those 6, the commit's future and
    the timer, which stays as the pending timer."""
    clock = VirtualClock()
    async with durable(tmp_path / "t.db", clock) as engine:
        await engine.schedule("h", delay=1)
        n = 500
        gc.collect()
        gc.disable()
        try:
            before = len(gc.get_objects())
            calls = [asyncio.ensure_future(engine.schedule("h", delay=1 + i)) for i in range(n)]
            await asyncio.sleep(0)  # every call has run up to its commit's await
            alive = (len(gc.get_objects()) - before) / n
        finally:
            gc.enable()
        await asyncio.gather(*calls)
    assert alive < 8.5, alive


async def test_a_committed_schedule_passes_no_wrapper_on_its_way(tmp_path: Path) -> None:
    """Between ``Engine.schedule`` and the writer, and back once committed, no frame of ours
    that only passes the call on (each cost about 2,000 instructions per call, 20,000
    concurrent calls in the benchmark) nor interpreted asyncio code per submit, and a commit
    whose await returned is not asked again whether it is done, cancelled or failed, nor
    whether to compact (its commit asked that, once for its batch). Seen with
    the profiler: an interpreted frame is a ``call``, a C method called from interpreted code
    a ``c_call`` (compiled code calls them without either, so the pure build checks those)."""
    clock = VirtualClock()
    seen: collections.Counter[str] = collections.Counter()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        code = frame.f_code
        if event == "call":
            seen[code.co_qualname] += 1
        elif event == "c_call" and code.co_filename.endswith("scheduling.py"):
            seen[f"{code.co_qualname} -> {arg.__name__}"] += 1

    async with durable(tmp_path / "t.db", clock) as engine:
        await engine.schedule("h", delay=1)
        sys.setprofile(profile)
        try:
            await asyncio.gather(*(engine.schedule("h", delay=2 + i) for i in range(20)))
        finally:
            sys.setprofile(None)
    assert "Engine.schedule" in seen  # the profiler saw the calls
    passers = {"LocalStorage.submit_fresh", "LocalStorage.settle_fresh", "Journal.submit_rows"}
    # Compiled, the coroutine doing the work is not a Python frame, nor is the gate's check.
    if wheel_engine.COMPILED:
        assert set(seen) & {"schedule", "Engine._check_open", "Front.check_open"} == set()
    asked = {
        f"Scheduler.{where} -> {what}"
        for where in ("settle_fresh", "_committed_fresh")
        for what in ("done", "cancelled", "exception")
    }
    # The writer wakes its task for the first submit of a batch only, without asking its event.
    assert set(seen) & (passers | asked | {"Commits.untrack", "Event.is_set"}) == set()
    # Whether to compact is asked once per commit (20 calls share one or two), not per call.
    assert seen["Commits.maybe_compact"] <= 3, seen["Commits.maybe_compact"]


async def test_a_stopped_writer_fails_a_fresh_schedule_before_anything_changes(
    tmp_path: Path,
) -> None:
    clock = VirtualClock()
    async with durable(tmp_path / "t.db", clock) as engine:
        assert engine.journal is not None
        first = await engine.schedule("h", delay=1)
        writer = engine.journal._writer
        assert writer is not None
        writer._task.cancel()  # the writer task dies (a bug, or the loop shutting it down)
        await asyncio.sleep(0)
        for call in (
            engine.schedule("h", delay=1, key="k"),
            engine.schedule_many([{"handler": "h", "delay": 1}]),
        ):
            with pytest.raises(JournalError):
                await call
        assert engine.timers() == [first]
