"""The fire path's common case (``wheel_engine/inline.py``): plain handlers in memory, run at once.

What it must keep of the general path: outcomes of a raising handler, events for a subscriber
that appears mid-batch, the counters, the order, and yielding to the loop between groups.
"""

from __future__ import annotations

import asyncio

from wheel_engine import Engine, Firing, RetryPolicy, TimerState
from wheel_engine.events import Event
from wheel_engine.starting import INLINE_BATCH
from wheel_engine.testing import VirtualClock


async def test_a_raising_plain_handler_retries_and_the_others_succeed() -> None:
    clock = VirtualClock()
    engine = Engine(None, clock=clock)
    ran: list[int] = []

    @engine.handler("h", retry=RetryPolicy(max_attempts=2, initial=1.0, jitter=False))
    def handler(firing: Firing) -> None:
        ran.append(firing.payload)
        if firing.payload == 2:
            raise ValueError("no")

    async with engine:
        await engine.schedule_many([{"handler": "h", "delay": 1, "payload": i} for i in range(5)])
        await clock.advance(1)
        assert ran == [0, 1, 2, 3, 4]
        failed = engine.get(engine.timers(state="PENDING")[0].key)
        assert failed is not None and failed.attempts == 1 and failed.payload == 2
        assert failed.last_error == "ValueError: no"
        await clock.advance(1)
        assert ran == [0, 1, 2, 3, 4, 2]
        stats = engine.stats()
        assert (stats["fired"], stats["succeeded"], stats["retried"], stats["dead"]) == (6, 4, 1, 1)


async def test_a_subscriber_that_appears_mid_batch_sees_the_rest_of_it() -> None:
    clock = VirtualClock()
    engine = Engine(None, clock=clock)
    events: list[Event] = []

    def handler(firing: Firing) -> None:
        if firing.payload == 1:
            engine.on_event(events.append)

    engine.register("h", handler)
    async with engine:
        await engine.schedule_many([{"handler": "h", "delay": 1, "payload": i} for i in range(4)])
        await clock.advance(1)
        keyed = {e.key: e for e in engine.timers()}
        seen = [(e.kind.value, keyed[e.key].payload) for e in events]
        # the handler of 1 subscribed while it ran: its own success is seen, then 2 and 3 as a
        # group (the old path emitted the whole batch's successes, 0's included, at its end)
        assert seen == [
            ("succeeded", 1),
            ("fired", 2),
            ("fired", 3),
            ("succeeded", 2),
            ("succeeded", 3),
        ]


async def test_a_plain_handler_sees_itself_running_and_the_next_one_pending() -> None:
    clock = VirtualClock()
    engine = Engine(None, clock=clock)
    seen: list[tuple[object, ...]] = []

    def handler(firing: Firing) -> None:
        own = engine.get(firing.key)
        assert own is not None
        seen.append((own.state, own.attempts, engine.stats()["running"]))

    engine.register("h", handler)
    async with engine:
        await engine.schedule_many([{"handler": "h", "delay": 1} for _ in range(3)])
        await clock.advance(1)
    assert seen == [(TimerState.RUNNING, 1, 1)] * 3
    assert [t.state for t in engine.timers()] == [TimerState.SUCCEEDED] * 3


async def test_a_big_due_burst_fires_in_order_and_lets_other_callbacks_run_between_groups() -> None:
    clock = VirtualClock()
    engine = Engine(None, clock=clock)
    order: list[object] = []

    def handler(firing: Firing) -> None:
        order.append(firing.payload)
        if firing.payload == 0:  # another loop callback, queued while the burst runs
            asyncio.get_running_loop().call_soon(order.append, "other")

    engine.register("h", handler)
    n = 3 * INLINE_BATCH + 5
    async with engine:
        await engine.schedule_many([{"handler": "h", "delay": 1, "payload": i} for i in range(n)])
        await clock.advance(1)
    assert [x for x in order if x != "other"] == list(range(n))
    # it ran after the first group, not after the whole burst
    assert order.index("other") == INLINE_BATCH
    assert engine.stats()["succeeded"] == n
