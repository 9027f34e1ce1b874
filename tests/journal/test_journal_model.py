"""Property: whatever the interleaving of commits, compactions and reopenings, recovery equals
the fold of every record ever committed (with retention off), and versions never go back."""

from __future__ import annotations

import asyncio
import math
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from journal import Journal
from journal.records import Ack, Attempt, Cancel, Dead, Record, Redrive, Retry, Schedule
from journal.rules import apply
from journal.state import PENDING, RUNNING, TimerRow

keys = st.sampled_from(["a", "b", "c", "d"])
versions = st.integers(min_value=1, max_value=8)
at = st.floats(min_value=0, max_value=100, allow_nan=False)
record = st.one_of(
    st.builds(Schedule, keys, versions, st.just("h"), at, st.none() | st.binary(max_size=4), at),
    st.builds(Cancel, keys, versions, at),
    st.builds(Attempt, keys, versions, st.integers(1, 3), at),
    st.builds(Ack, keys, versions, at),
    st.builds(Retry, keys, versions, st.integers(1, 3), st.just("e"), at, at),
    st.builds(Dead, keys, versions, st.integers(1, 3), st.just("e"), at),
    st.builds(Redrive, keys, versions, versions, at, at),
)
# ("submit", batch) | ("compact", None) | ("reopen", None)
step = st.one_of(
    st.tuples(st.just("submit"), st.lists(record, min_size=1, max_size=6)),
    st.tuples(st.just("compact"), st.none()),
    st.tuples(st.just("reopen"), st.none()),
)


def model(records: list[Record]) -> dict[str, TimerRow]:
    timers: dict[str, TimerRow] = {}
    for r in records:
        apply(timers, r)
    for row in timers.values():
        if row.state == RUNNING:
            row.state = PENDING
    return timers


async def run(path: str, steps: list[tuple[str, list[Record] | None]]) -> None:
    j = await Journal.open(path, durability="normal")
    written: list[Record] = []
    try:
        for op, arg in steps:
            if op == "submit":
                assert arg is not None
                futs = [j.submit([r]) for r in arg]  # concurrent, one commit
                await asyncio.gather(*futs)
                written += arg
            elif op == "compact":
                await j.compact(retention=math.inf, now=0.0)
            else:
                await j.close()
                j = await Journal.open(path, durability="normal")
            rec = await j.recover()
            assert rec.timers == model(written)
            versions = [r.version for r in written]
            versions += [r.new_version for r in written if type(r) is Redrive]
            assert rec.max_version == max(versions, default=0)
    finally:
        await j.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(step, max_size=12))
def test_recovery_equals_the_fold_of_everything(
    steps: list[tuple[str, list[Record] | None]],
) -> None:
    with tempfile.TemporaryDirectory() as d:
        asyncio.run(run(str(Path(d) / "m.db"), steps))
