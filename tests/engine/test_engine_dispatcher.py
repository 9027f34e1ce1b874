"""The dispatcher's slots (``wheel_engine/dispatcher.py``): ``max_concurrency`` bounds the
attempts taken however a freed slot is filled again, by the queue's head handed to the worker
whose slot freed (in memory) or by the next start group (on a journal), and every slot is given
back."""

from __future__ import annotations

from pathlib import Path

import pytest

from wheel_engine import Engine, Firing, TimerState
from wheel_engine.testing import VirtualClock


@pytest.mark.parametrize("durable", [False, True], ids=["in-memory", "journal"])
async def test_no_more_attempts_run_than_slots_after_freed_slots_were_filled(
    tmp_path: Path, durable: bool
) -> None:
    clock = VirtualClock()
    db = tmp_path / "t.db" if durable else None
    engine = Engine(db, clock=clock, durability="normal", max_concurrency=2)
    taken: list[int] = []  # attempts taken (charged, slot held) as each handler starts

    @engine.handler("h")
    async def handler(firing: Firing) -> None:
        taken.append(engine.stats()["running"])
        await clock.sleep(0.5)

    async with engine:
        # Four due at 1: two start, and at 1.5 each freed slot is filled from the queue. Four
        # more come due at 1.7, while both slots are taken: they must wait for a free one.
        first = [{"handler": "h", "delay": 1, "key": f"a{i}"} for i in range(4)]
        later = [{"handler": "h", "delay": 1.7, "key": f"b{i}"} for i in range(4)]
        await engine.schedule_many(first + later)
        await clock.advance(10)
        # A slot not counted when refilled lets the next group take more than max_concurrency
        # (they wait, charged, for a worker: the worker tasks alone still bound what runs).
        assert max(taken) == 2
        keys = [request["key"] for request in first + later]
        assert all(engine.get(key).state is TimerState.SUCCEEDED for key in keys)  # type: ignore[union-attr]
        assert engine.stats()["running"] == 0
