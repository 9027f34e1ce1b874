"""Fairness under a mass expiry (issue 26), on the virtual clock: a limited handler's backlog
of thousands does not hold another handler's timers back, and its own starts keep their order
and their limits exactly.

The bound asserted: a timer of another handler that comes due has at most one wake batch of the
backlog (``WAKE_BATCH``) and one start group (``INLINE_BATCH`` plain handlers) before it, however
long the backlog; it starts within one tick of its due. Before the gate took a limited handler's
due timers straight into its own line, they all waited in the starter's shared queue, and the
other handler's timer started after the whole burst of the backlog.
"""

from __future__ import annotations

import random
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from wheel_engine import Engine, Firing
from wheel_engine.limit_queue import WaitingLine
from wheel_engine.limits import WAKE_BATCH
from wheel_engine.starting import INLINE_BATCH
from wheel_engine.testing import VirtualClock
from wheel_engine.timer import QUEUED, Timer

BACKLOG = 20_000
TICK = 0.001


async def test_a_backlog_of_thousands_does_not_hold_back_another_handlers_timers(
    tmp_path: Path,
) -> None:
    clock = VirtualClock()
    engine = Engine(tmp_path / "t.db", clock=clock, tick=TICK)
    starts: list[str] = []  # the order handlers started in, across both
    b_lateness: list[float] = []

    @engine.handler("a", rate=5_000)
    def a(firing: Firing) -> None:
        starts.append("a")

    @engine.handler("b")
    def b(firing: Firing) -> None:
        starts.append("b")
        b_lateness.append(firing.fired_at - firing.due)

    async with engine:
        t0 = clock.time() + 1.0
        await engine.schedule_many([{"handler": "a", "at": t0} for _ in range(BACKLOG)])
        # B's first timer is due with the whole backlog (and scheduled after it: its version is
        # later), the others while it is worked off.
        await engine.schedule_many([{"handler": "b", "at": t0 + 0.01 * i} for i in range(300)])
        for _ in range(4_100):
            await clock.advance(TICK)
        assert len(b_lateness) == 300
        assert max(b_lateness) <= TICK  # as with nothing else due
        first_b = starts.index("b")
        assert first_b <= WAKE_BATCH + INLINE_BATCH  # not behind the burst of 5,000
        assert starts.count("a") <= 5_000 + 5_000 * 3.1 + 1  # the burst, then the rate
        limits = engine.stats()["limits"]["a"]
        assert limits["waiting_token"] == BACKLOG - starts.count("a")


async def test_a_limited_handlers_starts_keep_due_order_and_every_limit_exactly(
    tmp_path: Path,
) -> None:
    clock = VirtualClock()
    engine = Engine(tmp_path / "t.db", clock=clock, tick=TICK, max_concurrency=64)
    rate, burst, concurrency = 400.0, 20, 8
    started: list[tuple[float, int]] = []  # (start, payload: its rank in due order)
    running = 0
    peak = 0

    @engine.handler("a", rate=rate, burst=burst, concurrency=concurrency)
    async def a(firing: Firing) -> None:
        nonlocal running, peak
        started.append((clock.time(), firing.payload))
        running += 1
        peak = max(peak, running)
        await clock.sleep(0.015)
        running -= 1

    async with engine:
        t0 = clock.time() + 0.5
        # 2,000 dues over 0.2 s, scheduled in a scrambled order: many share a tick, out of due
        # order within it, so they reach the gate out of order.
        ranks = list(range(2_000))
        random.Random(26).shuffle(ranks)
        await engine.schedule_many(
            [{"handler": "a", "at": t0 + rank * 1e-4, "payload": rank} for rank in ranks]
        )
        for _ in range(8_000):  # 5 s at the rate, after the lead
            await clock.advance(TICK)
            if len(started) == 2_000 and running == 0:
                break
    assert [rank for _, rank in started] == list(range(2_000))  # (due, version) order
    assert peak == concurrency  # the cap, reached and never passed
    times = [start for start, _ in started]
    assert all(start >= t0 + rank * 1e-4 for start, rank in started)  # never early
    for i, start in enumerate(times):  # any window of T holds at most burst + rate * T
        for j in range(i, min(len(times), i + 60)):
            assert j - i + 1 <= burst + rate * (times[j] - start) + 1e-6


def _timer(due: float, seq: int) -> Timer:
    # Through the constructor: a compiled Timer cannot be made with __new__ alone.
    timer = Timer(f"k{seq}", seq, "a", due, None)
    timer.where = QUEUED
    return timer


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["push", "pop", "stale"]),
            st.integers(0, 20),  # due
            st.integers(0, 3),  # version
        ),
        max_size=120,
    )
)
def test_the_waiting_line_gives_the_earliest_live_timer_first(
    steps: list[tuple[str, int, int]],
) -> None:
    line = WaitingLine()
    model: list[Timer] = []  # the live timers waiting
    for action, due, seq in steps:
        if action == "push":
            timer = _timer(float(due), seq)
            line.push(timer)
            model.append(timer)
        elif action == "stale" and model:
            gone = model.pop(due % len(model))
            gone.where = 0  # cancelled while it waited: its entry goes stale
        else:
            expected = min(((t.due, t.seq) for t in model), default=None)
            timer = line.pop()
            assert (None if timer is None else (timer.due, timer.seq)) == expected
            if timer is not None:
                model.remove(timer)
    drained = [(t.due, t.seq) for t in line.drain()]
    assert drained == sorted((t.due, t.seq) for t in model)
    assert not line
