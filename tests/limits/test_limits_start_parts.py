"""A start group's parts (``wheel_engine.start_parts``): the plain part first, then one per
cluster-limited handler, each in the group's order; nothing lost, nothing twice."""

from __future__ import annotations

from wheel_engine.start_parts import split_group
from wheel_engine.timer import Timer


def _timers(*handlers: str) -> list[Timer]:
    return [Timer(f"{h}{i}", i + 1, h, 0.0, None) for i, h in enumerate(handlers)]


def test_a_group_splits_into_its_plain_part_and_one_part_per_cluster_limited_handler() -> None:
    inline = _timers("b", "a", "c", "a")
    pooled = _timers("x", "a", "b")
    parts = split_group(inline, pooled, frozenset({"a", "x"}))
    shown = [(p.plain, [t.key for t in p.inline], [t.key for t in p.pooled]) for p in parts]
    assert shown == [
        (True, ["b0", "c2"], ["b2"]),
        (False, ["a1", "a3"], ["a1"]),
        (False, [], ["x0"]),
    ]


def test_a_group_of_cluster_limited_timers_alone_has_no_plain_part() -> None:
    parts = split_group([], _timers("a", "a"), frozenset({"a"}))
    assert [(p.plain, len(p.inline), len(p.pooled)) for p in parts] == [(False, 0, 2)]
