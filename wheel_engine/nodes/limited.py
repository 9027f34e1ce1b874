"""``limit_scope="cluster"`` on a node: the claims of cluster-limited handlers go through their
rows in the database (:mod:`journal.postgres.limiting`), and what the database refused waits in
the handler's gate, PENDING and uncharged.

A cluster-limited handler has a gate (:mod:`wheel_engine.limits`) on every node as a node-scoped
one does, with the same limits: no node alone may exceed them, so the gate is a cheap first
filter that keeps the node's requests near what can start. The database decides: the node's
sink (:mod:`wheel_engine.nodes.sink`) sends such a handler's part of a start group as a claim
of its own (:meth:`ClusterLimiter.claim`), and after each reply :class:`ClusterLimiter`:

- sets the gate's token bucket to the database's (tokens left, on the node's clock from now), so
  the gate's refill wake comes when the database's bucket has a token again, never in a loop;
  but never below the timers the gate already moved to the starter's queue (:func:`_moved`);
- when every slot of the cluster was taken, holds the gate for :data:`SLOT_RETRY` seconds, or
  until an attempt of that handler ends on this node (``Limits.release``);
- when another node's claim of that handler held its row (the claim never waits for one:
  :func:`journal.postgres.limiting.claim`), holds the gate for :data:`ROW_RETRY` seconds, so
  that the timers beside it in the start group, of other handlers, never wait for that claim;
- puts each refused timer back into the gate's line (:meth:`ClusterLimiter.put_back`): QUEUED,
  PENDING, its charge undone (no attempt, guarantee 5), in ``(due, version)`` order; it is not
  "lost", and is asked about again when the gate wakes.

Which limits the rows hold: those of the node that registered last (a node writes its own when
it opens, and with its first claim after a later registration).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Final

from journal.postgres import PostgresStore
from journal.postgres.limiting import ClusterLimits, LimitedClaim
from wheel_engine.clock import Clock
from wheel_engine.limit_options import HandlerLimits
from wheel_engine.limits import Gate, Limits
from wheel_engine.timer import QUEUED, Timer
from wheel_engine.timers import TimerTable

__all__ = ["ROW_RETRY", "SLOT_RETRY", "ClusterLimiter"]

logger = logging.getLogger(__name__)

#: Seconds a gate waits before asking again when the database found every slot of the cluster
#: taken (a slot freed on another node is not announced here; one freed here wakes it at once).
SLOT_RETRY: Final = 0.05
#: Seconds a gate waits before asking again when another node's claim of the handler held its
#: row (a claim holds it for one round trip; the bucket keeps refilling meanwhile).
ROW_RETRY: Final = 0.02

Request = tuple[str, int, int, int]


def cluster_limits(limits: HandlerLimits) -> ClusterLimits:
    """A registration's limits as the row holds them."""
    return ClusterLimits(limits.rate, limits.burst, limits.concurrency)


class ClusterLimiter:
    """The node's side of its cluster-limited handlers (see the module docstring)."""

    def __init__(
        self, store: PostgresStore, limits: Limits, table: TimerTable, clock: Clock
    ) -> None:
        self._store = store
        self._clock = clock
        self._limits = limits
        self._table = table
        #: handler -> the limits this node wrote to its row (a new registration writes again)
        self._written: dict[str, HandlerLimits] = {}
        #: handler -> the cluster's running attempts and tokens as the last claim saw them
        self.seen: dict[str, dict[str, Any]] = {}
        self._warned: set[str] = set()

    def gate_of(self, handler: str) -> Gate | None:
        """``handler``'s gate if it is limited across the cluster, else None."""
        gate = self._limits.gates.get(handler)
        return gate if gate is not None and gate.limits.scope == "cluster" else None

    async def register(self) -> None:
        """Write the limits of every cluster-limited handler registered so far (at open)."""
        gates = {n: g.limits for n, g in self._limits.gates.items() if g.limits.scope == "cluster"}
        if gates:
            await self._store.register_limits({n: cluster_limits(h) for n, h in gates.items()})
            self._written.update(gates)

    def part_handler(self, key: str) -> str | None:
        """The cluster-limited handler of the start group's part whose first timer is ``key``
        (asked as the part is submitted), or None: the plain part (``start_parts``)."""
        timer = self._table.timers.get(key) if self._limits.cluster else None
        return None if timer is None or self.gate_of(timer.handler) is None else timer.handler

    async def claim(self, handler: str, requests: Sequence[Request]) -> LimitedClaim:
        """Claim ``requests`` of ``handler`` through its row; the gate learns the answer."""
        gate = self.gate_of(handler)
        assert gate is not None  # part_handler() named only those
        limits = gate.limits
        write = self._written.get(handler) != limits
        gate.hold.claims += 1  # no more of its line is moved to the queue until it answers
        try:
            try:
                reply = await self._store.claim_limited(
                    handler, cluster_limits(limits), requests, write=write
                )
            finally:
                gate.hold.claims -= 1
            if reply.row_busy:
                # Another node's claim held the row: this one waited for nothing and learnt
                # nothing (a registration not written yet is written with the next claim).
                gate.hold.row_until = self._clock.time() + ROW_RETRY
            else:
                if write:
                    self._written[handler] = limits
                self._learn(handler, gate, reply)
            return reply
        finally:
            # Timers parked while the claim was on its way are asked about now, whether it
            # answered or failed (a lost connection): nothing else would wake them. After
            # _learn, since wake() moves timers at once on the bucket's tokens.
            if gate.stalled():
                gate.wake()

    def _learn(self, handler: str, gate: Gate, reply: LimitedClaim) -> None:
        now = self._clock.time()
        bucket = gate.bucket
        if bucket is not None and reply.tokens is not None:
            # The database's tokens, as of now, but never fewer than the timers already moved
            # to the starter's queue (see _moved): the database refuses those it has no token
            # for, in a group beside other handlers' timers, and they wait in the line again.
            tokens = max(reply.tokens, float(_moved(gate)))
            bucket.tokens = min(float(bucket.burst), tokens)
            bucket.stamp = now
        if reply.blocked_on == "slot":
            gate.hold.slot_until = now + SLOT_RETRY
        mine = gate.limits
        differs = (reply.rate, reply.concurrency) != (mine.rate, mine.concurrency)
        if differs and handler not in self._warned:
            self._warned.add(handler)
            logger.warning(
                "handler %r: the cluster holds rate=%s, concurrency=%s (registered last by"
                " another node), not this node's rate=%s, concurrency=%s",
                handler,
                reply.rate,
                reply.concurrency,
                mine.rate,
                mine.concurrency,
            )
        self.seen[handler] = {
            "cluster_running": reply.running + len(reply.result.claimed),
            "cluster_tokens": reply.tokens,
        }

    def put_back(self, timer: Timer) -> bool:
        """``timer`` (uncharged, PENDING) was refused by its row: back into its gate's line.
        False if its handler is no longer cluster-limited here (the caller reads it again)."""
        gate = self.gate_of(timer.handler)
        if gate is None:
            return False
        self._table.queued += 1
        gate.put_back(timer, self._clock.time())
        return True


def _moved(gate: Gate) -> int:
    """``gate``'s timers moved to the starter's queue and not taken yet.

    The gate sized that batch by its own tokens; other nodes may have spent the database's
    since. Were the gate's bucket cut below the batch, the starter would end a start group at
    each of them it refused (the queue's order is kept), and every timer behind them, of any
    handler, would wait until the batch was worked off at this node's share of the rate."""
    return sum(1 for timer in gate.woken if timer.where == QUEUED)
