"""The cyclic collector around a recovery (``wheel_engine.gcpause``): paused while the journal is
read and the timers restored, enabled again after, and the recovered timers not walked by the
young collections that would follow (they move to the oldest generation at once)."""

from __future__ import annotations

import gc
from pathlib import Path

from wheel_engine import Engine
from wheel_engine.gcpause import BULK
from wheel_engine.testing import VirtualClock

N = 2 * BULK  # above the size at which the collector is paused


async def _journal_with_pending_timers(path: Path, clock: VirtualClock) -> None:
    engine = Engine(str(path), clock=clock)
    engine.register("h", lambda firing: None)
    async with engine:
        await engine.schedule_many([{"handler": "h", "delay": 3600.0} for _ in range(N)])


async def test_recovered_timers_skip_the_young_collections(tmp_path: Path) -> None:
    clock = VirtualClock()
    await _journal_with_pending_timers(tmp_path / "j.db", clock)
    assert gc.isenabled()
    engine = Engine(str(tmp_path / "j.db"), clock=clock)
    engine.register("h", lambda firing: None)
    try:
        await engine.start()
        [*_] = ([] for _ in range(10))  # tracked allocations: a due young collection runs
        timers = list(engine._table.timers.values())
        assert len(timers) == N
        # In the oldest generation already: a young collection walks the young ones only.
        oldest = {id(obj) for obj in gc.get_objects(generation=2)}
        assert all(id(timer) in oldest for timer in timers)
        assert gc.isenabled()
        assert gc.get_freeze_count() == 0
    finally:
        await engine.close()


async def test_objects_the_process_froze_stay_frozen(tmp_path: Path) -> None:
    clock = VirtualClock()
    await _journal_with_pending_timers(tmp_path / "j.db", clock)
    marker: list[int] = []  # a tracked object of the process's own
    gc.freeze()  # as a pre-forking server does
    try:
        engine = Engine(str(tmp_path / "j.db"), clock=clock)
        engine.register("h", lambda firing: None)
        async with engine:
            assert gc.isenabled()
            assert gc.get_freeze_count() > 0
            # Still frozen: get_objects() lists every generation but the permanent one.
            assert not any(obj is marker for obj in gc.get_objects())
    finally:
        gc.unfreeze()
