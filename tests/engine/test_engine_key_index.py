"""The index by key (:mod:`wheel_engine.key_index`) against a dict, the reference model: the
same timer for every key however it was made or spelled, engine-made keys never colliding with
one a caller spelled, and the array's cells bounded by its live timers."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wheel_engine import CancelResult, Engine
from wheel_engine.key_index import KeyIndex
from wheel_engine.testing import VirtualClock
from wheel_engine.timer import Timer

OPERATIONS = ("make", "make", "make", "respell", "user", "odd", "ahead", "delete", "delete", "bulk")


class Run:
    def __init__(self, trim_at: int, retire_at: int) -> None:
        self.index = KeyIndex(trim_at=trim_at, retire_at=retire_at)
        self.model: dict[str, Timer] = {}
        self.replaced: list[Timer] = []
        self.version = 0

    def timer(self, key: str, serial: int = 0) -> Timer:
        self.version += 1
        return Timer(key, self.version, "h", 0.0, None, serial=serial)

    def put(self, timer: Timer) -> None:
        old = self.model.get(timer.key)
        if old is not None:
            self.replaced.append(old)
        self.model[timer.key] = timer
        self.index.put(timer)

    def apply(self, operation: str, n: int) -> None:
        index, model, made = self.index, self.model, self.index.made
        keys = sorted(model)
        if operation == "make":
            timer = self.timer(made.prefix, made.take())
            assert timer.key not in model  # never a key a caller holds
            self.put(timer)
        elif operation == "respell" and keys:  # a caller schedules again under a made key
            self.put(self.timer(keys[n % len(keys)]))
        elif operation == "user":
            self.put(self.timer(f"order:{n % 3}"))
        elif operation == "odd":  # spelled like a made key, but not as the engine spells one
            self.put(self.timer(f"{made.prefix}-0{n % 3 + 1}" if n % 2 else f"{made.prefix}-"))
        elif operation == "ahead":  # a serial the engine has not made yet
            self.put(self.timer(f"{made.prefix}-{made.next_serial + n % 3}"))
        elif operation == "bulk":  # update(), as restore calls it: every kind of key at once
            spelled = [f"order:{n % 3}", f"{made.prefix}-0{n % 3 + 1}"]
            spelled.append(f"{made.prefix}-{made.next_serial + n % 3}")
            spelled += keys[n % len(keys) :][:2] if keys else []
            bulk = {key: self.timer(key) for key in spelled}
            for key, timer in bulk.items():
                old = model.get(key)
                if old is not None:
                    self.replaced.append(old)
                model[key] = timer
            index.update(bulk)
        elif operation == "delete" and keys:
            key = keys[n % len(keys)]
            if n % 2:
                index.delete(model[key])
            else:
                del index[key]
            self.replaced.append(model.pop(key))

    def check(self) -> None:
        index, model, prefix = self.index, self.model, self.index.made.prefix
        assert len(index) == len(model)
        assert dict(index.items()) == model
        assert sorted(index) == sorted(model)
        for key, timer in model.items():
            assert index.get(key) is timer and index[key] is timer and key in index
            assert index.holds(timer)
        for timer in self.replaced:
            assert not index.holds(timer)
        for absent in (f"{prefix}-0", f"{prefix}-{index.made.next_serial}", "nobody", 7):
            assert absent not in model and index.get(absent) is None and absent not in index
        assert index.span() <= max(index.retire_at, 4 * index.live())


@settings(max_examples=300, deadline=None)
@given(
    trim_at=st.sampled_from((1, 2, 8)),
    retire_at=st.sampled_from((1, 4, 16, 4096)),
    operations=st.lists(st.tuples(st.sampled_from(OPERATIONS), st.integers(0, 50)), max_size=120),
)
def test_the_index_finds_what_a_dict_would(
    trim_at: int, retire_at: int, operations: list[tuple[str, int]]
) -> None:
    run = Run(trim_at, retire_at)
    for operation, n in operations:
        run.apply(operation, n)
        run.check()


def test_timers_that_leave_in_order_keep_the_array_short() -> None:
    run = Run(trim_at=64, retire_at=1 << 30)  # trimming alone
    for _ in range(10_000):
        run.apply("make", 0)
    for key in sorted(run.model, key=lambda key: run.model[key].serial)[:9_990]:
        run.index.delete(run.model.pop(key))
    run.check()
    assert run.index.span() <= 64 and run.index.live() == 10


def test_one_long_timer_does_not_keep_a_cell_for_every_timer_behind_it() -> None:
    run = Run(trim_at=64, retire_at=256)
    run.apply("make", 0)  # the long one: serial 1, never leaves
    for _ in range(100):
        for _ in range(100):
            run.apply("make", 0)
        for key in [key for key, timer in run.model.items() if timer.serial > 1]:
            run.index.delete(run.model.pop(key))
    run.check()
    assert run.index.span() <= 256 and run.index.live() <= 1


def test_a_made_timer_keeps_no_key_string() -> None:
    index = KeyIndex()
    timer = Timer(index.made.prefix, 1, "h", 0.0, None, serial=index.made.take())
    index.put(timer)
    assert timer.key_base is index.made.prefix and timer.key == f"{index.made.prefix}-1"
    assert not index.named  # the array holds it


async def test_an_engine_finds_its_made_keys_however_they_come_back() -> None:
    engine = Engine(None, clock=VirtualClock())
    engine.register("h", lambda firing: None)
    async with engine:
        first = await engine.schedule("h", delay=5)
        prefix, serial = first.key.rsplit("-", 1)
        # Under the key it made, a caller replaces the timer, reads it, cancels it.
        again = await engine.schedule("h", delay=6, key=first.key)
        info = engine.get(first.key)
        assert info is not None and info.version == again.version
        assert engine.get(f"{prefix}-0{serial}") is None  # another key
        # A key spelled ahead of the engine's serials is the caller's: the engine never makes it.
        ahead = f"{prefix}-{int(serial) + 2}"
        await engine.schedule("h", delay=7, key=ahead)
        made = [info.key for info in await engine.schedule_many([{"handler": "h", "delay": 8}] * 5)]
        assert ahead not in made and len(set(made)) == 5
        for key in [first.key, ahead, *made]:
            got = engine.get(key)
            assert got is not None and got.key == key
        assert await engine.cancel(first.key) is CancelResult.CANCELED
        assert engine.get(ahead) is not None


@pytest.mark.parametrize("bad", [None, 7, b"k", ("k",)])
def test_a_key_that_is_no_string_names_no_timer(bad: Any) -> None:
    assert KeyIndex().get(bad) is None
