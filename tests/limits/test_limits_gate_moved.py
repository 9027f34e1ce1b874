"""A gate's line goes on when the timers it moved to the starter's queue are never taken.

The gate waits for the last timer it moved to be taken (``Gate.took``) before it moves more. A
moved timer can leave the queue without being taken: cancelled there, or on a node dropped with
a partition the node lost (``tests/nodes/test_nodes_cluster_limits.py``'s
``test_the_limits_of_the_node_that_registered_last_hold`` stalled that way about one run in
eight: two of its six timers never ran). Neither tells the gate; it must look again by itself.
"""

from __future__ import annotations

from collections import deque

from wheel_engine.events import EventBus
from wheel_engine.limit_gate import STALE_RECHECK
from wheel_engine.limit_options import HandlerLimits
from wheel_engine.limits import Limits
from wheel_engine.testing import VirtualClock
from wheel_engine.timer import DETACHED, QUEUED, Timer


class _Starter:
    closing = False
    asked = 0

    def start_later(self) -> None:
        self.asked += 1


async def test_a_line_whose_moved_timer_is_never_taken_moves_the_next_one_later() -> None:
    clock = VirtualClock()
    queue: deque[Timer] = deque()
    limits = Limits(clock, EventBus(), queue, _Starter())
    limits.configure("h", HandlerLimits(None, 1.0, 1, "node"))
    timers = [Timer(f"k{i}", i + 1, "h", clock.time(), None) for i in range(3)]
    for timer in timers:
        timer.where = QUEUED
        limits.arrive(timer, clock.time())
    assert list(queue) == [timers[0]]  # the one token: k0 moved, k1 and k2 parked
    assert limits.admit(queue.popleft())
    timers[0].where = DETACHED  # taken into a start group
    await clock.advance(1.0)  # a token again: the refill wake moves k1
    assert list(queue) == [timers[1]]
    queue.popleft()
    timers[1].where = DETACHED  # k1 leaves the queue untaken: cancelled, or its partition lost
    await clock.advance(1.0 + STALE_RECHECK)
    assert list(queue) == [timers[2]]  # the line looked again: k2 moved
