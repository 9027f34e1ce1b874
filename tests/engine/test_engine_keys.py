"""The keys the engine makes (:mod:`wheel_engine.engine_keys`): one spelling, never a key twice,
whichever schedule path made it (single, batch of bare requests, batch through the checker,
the general path a batch falls back to), and different between engines."""

from __future__ import annotations

import re
from typing import Any

from wheel_engine import Engine
from wheel_engine.engine_keys import EngineKeys
from wheel_engine.testing import VirtualClock

ENGINE_KEY = re.compile(r"[0-9a-f]{12}-[1-9][0-9]*")


def test_keys_count_up_from_one_under_one_random_prefix() -> None:
    keys = EngineKeys()
    made = [keys.new() for _ in range(3)]
    assert made == [f"{keys.prefix}-1", f"{keys.prefix}-2", f"{keys.prefix}-3"]
    assert all(ENGINE_KEY.fullmatch(key) for key in made)
    assert keys.key(7) == f"{keys.prefix}-7"
    keys.skip_to(10)
    assert keys.new() == f"{keys.prefix}-10"
    assert EngineKeys().prefix != EngineKeys().prefix  # 48 random bits each


async def test_every_schedule_path_makes_new_keys_of_one_sequence() -> None:
    clock = VirtualClock()
    engine = Engine(None, clock=clock)
    engine.register("h", lambda firing: None)
    async with engine:
        keys: list[str] = []
        keys.append((await engine.schedule("h", delay=5)).key)  # single
        bare: list[dict[str, Any]] = [{"handler": "h", "delay": 5} for _ in range(3)]
        keys += [info.key for info in await engine.schedule_many(bare)]
        checked = [{"handler": "h", "delay": 5, "payload": i} for i in range(2)]
        keys += [info.key for info in await engine.schedule_many(bare[:1] + checked)]
        # A key that names a live timer sends the batch down the general path, whose made
        # keys must not reuse the serials the abandoned fast pass had numbered.
        taken = [{"handler": "h", "delay": 5}, {"handler": "h", "delay": 5, "key": keys[0]}]
        keys += [info.key for info in await engine.schedule_many(taken)][:1]
        keys.append((await engine.schedule("h", delay=5)).key)
        assert all(ENGINE_KEY.fullmatch(key) for key in keys)
        assert len(set(keys)) == len(keys) == 9
        assert len({key.partition("-")[0] for key in keys}) == 1
        serials = [int(key.partition("-")[2]) for key in keys]
        assert serials == sorted(serials)
        assert engine.stats()["pending"] == 9
        for key in keys:
            info = engine.get(key)
            assert info is not None and info.key == key


async def test_two_engines_make_different_keys() -> None:
    made = []
    for _ in range(2):
        engine = Engine(None, clock=VirtualClock())
        engine.register("h", lambda firing: None)
        async with engine:
            made.append((await engine.schedule("h", delay=5)).key)
    assert made[0] != made[1]
