"""What a node's gate learns from a cluster-limited claim's reply (``nodes/limited.py``), on the
virtual clock with a stand-in store: the reply may cut the gate's tokens (other nodes spent the
database's), yet the timers the gate already moved to the starter's queue are still admitted
there, so that the starter never ends a start group at each of them while the other handlers'
timers behind them wait (figure 10's PostgreSQL half measured B's lateness p99 at 0.3-0.55 s
that way); and a claim that found the row held by another claim learns nothing from it.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any, cast

import pytest

from journal.postgres import AttemptResult, PostgresStore
from journal.postgres.limiting import LimitedClaim
from wheel_engine.events import EventBus
from wheel_engine.limit_options import HandlerLimits
from wheel_engine.limits import Limits
from wheel_engine.nodes.limited import ROW_RETRY, ClusterLimiter
from wheel_engine.testing import VirtualClock
from wheel_engine.timer import DETACHED, QUEUED, Timer
from wheel_engine.timers import TimerTable

RATE = 100.0
MOVED = 40


class _Starter:
    closing = False

    def start_later(self) -> None:
        pass


class _Store:
    """``claim_limited`` answers with ``reply``; the writes asked for are kept."""

    def __init__(self, reply: LimitedClaim) -> None:
        self.reply = reply
        self.writes: list[bool] = []

    async def claim_limited(
        self, handler: str, *limits_and_requests: Any, write: bool
    ) -> LimitedClaim:
        self.writes.append(write)
        return self.reply


def _reply(tokens: float | None, *, row_busy: bool = False) -> LimitedClaim:
    result = AttemptResult([], [], None)
    return LimitedClaim(result, ["x"], 0, tokens, RATE, None, row_busy)


def _node(reply: LimitedClaim) -> tuple[ClusterLimiter, Limits, deque[Timer], _Store, Any]:
    clock = VirtualClock()
    queue: deque[Timer] = deque()
    limits = Limits(clock, EventBus(), queue, _Starter())
    limits.configure("a", HandlerLimits(None, RATE, int(RATE), "cluster"))
    table = TimerTable({}, tick=0.001, retention=60.0, max_retained=10)
    store = _Store(reply)
    limiter = ClusterLimiter(cast(PostgresStore, store), limits, table, clock)
    for i in range(MOVED):  # due now, the gate's bucket full: moved to the queue at once
        timer = Timer(f"a{i}", i + 1, "a", clock.time(), None)
        timer.where = QUEUED
        limits.arrive(timer, clock.time())
    return limiter, limits, queue, store, clock


async def test_the_timers_moved_to_the_queue_stay_admitted_after_a_reply_with_fewer_tokens() -> (
    None
):
    limiter, limits, queue, _, _ = _node(_reply(tokens=0.0))
    assert len(queue) == MOVED
    await limiter.claim("a", [])  # other nodes spent the database's tokens meanwhile
    admitted = [limits.admit(timer) for timer in list(queue)]
    assert admitted == [True] * MOVED  # the database refuses them instead, in one group
    gate = limits.gates["a"]
    assert gate.bucket is not None and gate.bucket.whole(0.0) == 0  # no more than the database's
    assert gate.waiting() == 0


async def test_a_claim_that_found_the_row_held_waits_and_learns_nothing() -> None:
    limiter, limits, _, store, clock = _node(_reply(tokens=None, row_busy=True))
    gate = limits.gates["a"]
    assert gate.bucket is not None
    tokens = gate.bucket.tokens
    limiter._written.clear()  # a registration the row has not seen yet
    await limiter.claim("a", [])
    assert gate.hold.row_until == clock.time() + ROW_RETRY  # asked again a moment later
    assert gate.bucket.tokens == tokens  # the reply read nothing of the row
    assert limiter.seen == {}
    await limiter.claim("a", [])
    assert store.writes == [True, True]  # the limits go with the next claim that holds it


def _taken(limits: Limits, queue: deque[Timer], timer: Timer, now: float) -> None:
    """``timer`` arrives, is admitted at the queue's head and charged, as the starter does."""
    timer.where = QUEUED
    limits.arrive(timer, now)
    assert queue.popleft() is timer and limits.admit(timer)
    timer.charge(now)


async def test_an_attempt_ending_frees_a_slot_but_not_the_row_another_claim_holds() -> None:
    """An attempt of the handler ending here frees a slot; it says nothing about the row that
    another node's claim holds: the timer the row refused waits out ``ROW_RETRY`` all the same
    (before, the end of any attempt ended that hold too, and the next claim found the row held
    again, a round trip for nothing)."""
    clock = VirtualClock()
    queue: deque[Timer] = deque()
    limits = Limits(clock, EventBus(), queue, _Starter())
    limits.configure("a", HandlerLimits(2, None, None, "cluster"))  # a cap: a slot is freed
    table = TimerTable({}, tick=0.001, retention=60.0, max_retained=10)
    store = cast(PostgresStore, _Store(_reply(tokens=None, row_busy=True)))
    limiter = ClusterLimiter(store, limits, table, clock)
    now = clock.time()
    ran = Timer("ran", 1, "a", now, None)
    refused = Timer("refused", 2, "a", now, None)
    _taken(limits, queue, ran, now)  # its attempt runs on this node
    _taken(limits, queue, refused, now)
    await limiter.claim("a", [])  # ... claimed beside another node's claim that held the row
    refused.uncharge()
    assert limiter.put_back(refused)  # back into the line, uncharged
    gate = limits.gates["a"]
    limits.release(ran)  # the attempt ends: a slot is free, the row is still held
    assert list(queue) == [] and gate.waiting() == 1
    assert gate.describe()["waiting_row"] == 1
    await clock.advance(ROW_RETRY)
    assert list(queue) == [refused]  # asked about again once the row's hold is over


class _HeldStore(_Store):
    """``claim_limited`` answers ``reply`` (or raises ``error``) once ``answer`` is set."""

    def __init__(self, reply: LimitedClaim, error: Exception | None = None) -> None:
        super().__init__(reply)
        self.answer = asyncio.Event()
        self.error = error

    async def claim_limited(
        self, handler: str, *limits_and_requests: Any, write: bool
    ) -> LimitedClaim:
        await self.answer.wait()
        if self.error is not None:
            raise self.error
        return self.reply


async def _late_behind_a_claim_on_its_way(
    store: _HeldStore,
) -> tuple[asyncio.Future[LimitedClaim], Limits, deque[Timer], Timer]:
    """A node whose claim of "a" waits on ``store``, and a timer ``late`` that arrived at the
    gate meanwhile (parked: it would find the row held by that claim)."""
    limiter, limits, queue, _, clock = _node(store.reply)
    limiter._store = cast(PostgresStore, store)
    queue.clear()
    for timer in limits.gates["a"].woken:
        timer.where = DETACHED  # the moved ones were taken
    claim = asyncio.ensure_future(limiter.claim("a", []))
    await asyncio.sleep(0)
    late = Timer("late", MOVED + 1, "a", clock.time(), None)
    late.where = QUEUED
    limits.arrive(late, clock.time())
    assert list(queue) == [] and limits.gates["a"].describe()["waiting_row"] == 1
    return claim, limits, queue, late


async def test_no_more_of_the_line_moves_to_the_queue_while_the_nodes_own_claim_is_on_its_way() -> (
    None
):
    """While this node's claim of the handler is on its way, a second one would find the row
    held by the first and be refused: the gate moves nothing more to the starter's queue until
    the first answers, then at once."""
    store = _HeldStore(_reply(tokens=float(RATE)))
    claim, _, queue, late = await _late_behind_a_claim_on_its_way(store)
    store.answer.set()
    await claim
    assert list(queue) == [late]  # the answer wakes the line


async def test_a_claim_that_failed_wakes_the_line_parked_while_it_was_on_its_way() -> None:
    """A claim that fails (its connection lost) wakes the line all the same: before, the timers
    parked behind it waited for a wake that never came."""
    store = _HeldStore(_reply(tokens=float(RATE)), error=ConnectionError("lost"))
    claim, limits, queue, late = await _late_behind_a_claim_on_its_way(store)
    store.answer.set()
    with pytest.raises(ConnectionError):
        await claim  # the failure reaches the start group, which puts its timers back
    assert limits.gates["a"].hold.claims == 0
    assert list(queue) == [late]
