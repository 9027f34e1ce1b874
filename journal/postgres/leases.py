"""Partition leases: which node may fire the timers of which partition, fenced by an epoch.

A node owns a partition while its lease (``wheel_partitions.lease_until``, on the database's
clock) has not lapsed. Taking a partition bumps its ``epoch``: the fencing token that every
attempt records and every outcome must match, so a node that lost a partition (paused, cut off,
slow) can never overwrite what the new owner did.

Guaranteed:

- at most one node holds a valid lease on a partition at any instant of the database's clock;
- a partition is taken only when free or lapsed (or held under this node's own name by an
  earlier incarnation), with ``FOR UPDATE SKIP LOCKED``, so acquirers never wait on each other;
- taking a partition and returning the rows left RUNNING under an older epoch to PENDING is one
  transaction; a cancel that reached such a row while it ran makes it CANCELED instead;
- :meth:`Leases.usable` turns false before the lease lapses even if the database cannot be
  reached: its deadline is measured on this node's monotonic clock from *before* the renewal
  was sent, less a margin, so it is never later than the database's expiry (clock rates agree).

Not guaranteed: that a handler started under a lease finishes before the lease lapses. If it
outlives the lease and another node takes the partition, the timer runs again there (at least
once) and the first run's outcome is rejected.

Balancing: every node heartbeats in ``wheel_nodes``; a node takes partitions up to its fair
share, ``ceil(partitions / live nodes)``, and :meth:`Leases.surplus` names those it holds
beyond it, which the caller releases once their running handlers are done.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from psycopg import AsyncConnection

from journal.postgres.schema import DB_NOW, NOTIFY_CHANNEL
from journal.postgres.states import REQUEUED_STATE, RUNNING_CODE

__all__ = ["DEFAULT_LEASE", "RELEASED", "Lease", "LeaseChange", "Leases"]

#: Seconds a lease lasts after each renewal, unless the node says otherwise.
DEFAULT_LEASE: Final = 10.0
#: A node renews every this fraction of its lease, so two renewals can fail before it lapses.
RENEW_FRACTION: Final = 1 / 3
#: A node stops using a lease this fraction of the lease before it lapses (slack for a
#: statement in flight, GC pauses and clock-rate drift).
SAFETY_FRACTION: Final = 0.2
#: NOTIFY payload telling the other nodes that partitions were freed: take them now.
RELEASED: Final = "released"
#: A node whose heartbeat lapsed this many leases ago is forgotten.
_FORGET_AFTER: Final = 10

_HEARTBEAT: Final = (
    "INSERT INTO wheel_nodes AS n (node, alive_until)"
    f" VALUES (%(node)s, {DB_NOW} + %(lease)s)"
    " ON CONFLICT (node) DO UPDATE SET alive_until = EXCLUDED.alive_until"
    f" RETURNING (SELECT count(*) FROM wheel_nodes WHERE alive_until > {DB_NOW}"
    "  AND node <> %(node)s) + 1"
)
_FORGET: Final = f"DELETE FROM wheel_nodes WHERE alive_until < {DB_NOW} - %(age)s"
# Only a lease that has not lapsed is renewed: a lapsed one is lost even if nobody took it
# meanwhile, and is taken again under a new epoch (with its reset and a reload), since rows
# this node claimed before the lapse may have been left RUNNING or unread (issue 21).
_RENEW: Final = (
    f"UPDATE wheel_partitions p SET lease_until = {DB_NOW} + %(lease)s"
    " FROM unnest(%(parts)s::int[], %(epochs)s::bigint[]) AS o(partition, epoch)"
    " WHERE p.partition = o.partition AND p.epoch = o.epoch AND p.owner = %(node)s"
    f" AND p.lease_until > {DB_NOW}"
    f" RETURNING p.partition, p.lease_until - {DB_NOW}"
)
_TAKE: Final = (
    "WITH free AS (SELECT partition FROM wheel_partitions"
    f"  WHERE (owner IS NULL OR lease_until <= {DB_NOW}"
    "   OR (owner = %(node)s AND NOT partition = ANY(%(mine)s::int[])))"
    "  ORDER BY random() LIMIT %(want)s FOR UPDATE SKIP LOCKED)"
    " UPDATE wheel_partitions p SET owner = %(node)s, epoch = p.epoch + 1,"
    f"  lease_until = {DB_NOW} + %(lease)s, acquired_at = {DB_NOW}"
    f" FROM free WHERE p.partition = free.partition"
    f" RETURNING p.partition, p.epoch, p.lease_until - {DB_NOW}"
)
# A separate statement of the same transaction, so that its snapshot is taken after the
# partition rows were locked: any attempt that committed under the old epoch is visible here.
_RESET: Final = (
    f"UPDATE wheel_timers t SET state = {REQUEUED_STATE},"
    f" finished_at = CASE WHEN t.cancel_requested THEN {DB_NOW} END, cancel_requested = false"
    " FROM unnest(%(parts)s::int[], %(epochs)s::bigint[]) AS g(partition, epoch)"
    f" WHERE t.partition = g.partition AND t.state = {RUNNING_CODE} AND t.run_epoch < g.epoch"
)
_RELEASE: Final = (
    "UPDATE wheel_partitions p SET owner = NULL, lease_until = 0"
    " FROM unnest(%(parts)s::int[], %(epochs)s::bigint[]) AS o(partition, epoch)"
    " WHERE p.partition = o.partition AND p.epoch = o.epoch AND p.owner = %(node)s"
    " RETURNING p.partition"
)
_NOTIFY: Final = "SELECT pg_notify(%s, %s)"
_LEAVE: Final = "DELETE FROM wheel_nodes WHERE node = %(node)s"


@dataclass(slots=True)
class Lease:
    """This node's lease on one partition."""

    partition: int
    epoch: int  #: the fencing token: attempts record it, outcomes must match it
    deadline: float  #: local monotonic time after which this node must not start attempts
    #: Local monotonic time by which the lease has lapsed in the database for certain
    #: (measured from *after* the renewal's reply), unless renewed again meanwhile.
    lapsed_by: float = math.inf


@dataclass(slots=True)
class LeaseChange:
    """What one :meth:`Leases.maintain` round changed."""

    gained: dict[int, int] = field(default_factory=dict)  #: partition -> new epoch
    lost: list[int] = field(default_factory=list)  #: partitions that another node holds now
    reset: int = 0  #: RUNNING rows of gained partitions turned back to PENDING (or CANCELED)
    live_nodes: int = 1  #: nodes that heartbeated within a lease, this one included
    fair_share: int = 0  #: partitions this node should hold at most


class Leases:
    """This node's leases. Not thread-safe; one instance per node, used from one event loop."""

    __slots__ = ("_monotonic", "lease", "node", "owned", "partitions")

    def __init__(
        self,
        node: str,
        partitions: int,
        lease: float = DEFAULT_LEASE,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if not node or type(node) is not str:
            raise ValueError(f"node must be a non-empty str, not {node!r}")
        if not lease > 0 or math.isinf(lease):
            raise ValueError(f"lease must be a positive number of seconds, not {lease!r}")
        self.node = node
        self.partitions = partitions
        self.lease = float(lease)
        self.owned: dict[int, Lease] = {}
        self._monotonic = monotonic

    @property
    def renew_every(self) -> float:
        """Seconds between :meth:`maintain` rounds."""
        return self.lease * RENEW_FRACTION

    def usable(self, partition: int) -> bool:
        """True while this node may start attempts in ``partition`` (see the module doc)."""
        lease = self.owned.get(partition)
        return lease is not None and self._monotonic() < lease.deadline

    def usable_at(self, partition: int, epoch: int) -> bool:
        """True while this node may start what it claimed in ``partition`` under ``epoch``:
        the lease it holds now is that epoch's and :meth:`usable`. A claim whose reply comes
        after the lease's deadline (the node was paused, the reply was slow) is never run."""
        lease = self.owned.get(partition)
        return lease is not None and lease.epoch == epoch and self._monotonic() < lease.deadline

    def lapsed(self, partition: int, epoch: int) -> bool:
        """True once ``epoch`` of ``partition`` is over for good: this node holds another
        epoch or none, or the lease has lapsed in the database by now (it is never renewed
        after that, so whoever takes the partition next returns its RUNNING rows)."""
        lease = self.owned.get(partition)
        return lease is None or lease.epoch != epoch or self._monotonic() >= lease.lapsed_by

    def epoch_of(self, partition: int) -> int | None:
        """The epoch this node holds ``partition`` at, while :meth:`usable`; else None."""
        lease = self.owned.get(partition)
        if lease is None or self._monotonic() >= lease.deadline:
            return None
        return lease.epoch

    def fair_share(self, live_nodes: int) -> int:
        return math.ceil(self.partitions / max(1, live_nodes))

    def surplus(self, live_nodes: int) -> list[int]:
        """Partitions held beyond the fair share (highest numbers first): release them."""
        extra = len(self.owned) - self.fair_share(live_nodes)
        return sorted(self.owned, reverse=True)[: max(0, extra)]

    def _pairs(self, partitions: Iterable[int]) -> dict[str, Any]:
        chosen = [p for p in partitions if p in self.owned]
        return {
            "node": self.node,
            "parts": chosen,
            "epochs": [self.owned[p].epoch for p in chosen],
            "lease": self.lease,
        }

    def _deadline(self, sent: float, remaining: float) -> float:
        return sent + remaining - self.lease * SAFETY_FRACTION

    def _lapsed_by(self, remaining: float) -> float:
        # The statement ran before now: the database's expiry is no later than now + remaining
        # (plus a margin for clock-rate drift).
        return self._monotonic() + remaining + self.lease * SAFETY_FRACTION

    async def maintain(self, conn: AsyncConnection[Any]) -> LeaseChange:
        """Heartbeat, renew every held lease, then take free partitions up to the fair share.

        Partitions whose renewal did not match (taken over, or released by an operator) are
        dropped at once and reported in ``lost``. Raises the driver's error when the database
        cannot be reached; the held leases then keep their old deadlines and lapse on their own.
        """
        change = LeaseChange()
        sent = self._monotonic()
        cur = await conn.execute(_HEARTBEAT, {"node": self.node, "lease": self.lease})
        row = await cur.fetchone()
        change.live_nodes = int(row[0]) if row is not None else 1
        change.fair_share = self.fair_share(change.live_nodes)
        await self._renew(conn, sent, change)
        want = change.fair_share - len(self.owned)
        if want > 0:
            await self._take(conn, want, change)
        await conn.execute(_FORGET, {"age": self.lease * _FORGET_AFTER})
        return change

    async def _renew(self, conn: AsyncConnection[Any], sent: float, change: LeaseChange) -> None:
        if not self.owned:
            return
        cur = await conn.execute(_RENEW, self._pairs(self.owned))
        renewed = {int(p): float(remaining) for p, remaining in await cur.fetchall()}
        for partition in list(self.owned):
            remaining = renewed.get(partition)
            if remaining is None:
                del self.owned[partition]
                change.lost.append(partition)
            else:
                lease = self.owned[partition]
                lease.deadline = self._deadline(sent, remaining)
                lease.lapsed_by = self._lapsed_by(remaining)

    async def _take(self, conn: AsyncConnection[Any], want: int, change: LeaseChange) -> None:
        sent = self._monotonic()
        async with conn.transaction():
            cur = await conn.execute(
                _TAKE,
                {"node": self.node, "mine": list(self.owned), "want": want, "lease": self.lease},
            )
            taken = [(int(p), int(e), float(r)) for p, e, r in await cur.fetchall()]
            if not taken:
                return
            parts = [p for p, _, _ in taken]
            epochs = [e for _, e, _ in taken]
            cur = await conn.execute(_RESET, {"parts": parts, "epochs": epochs})
            change.reset = max(0, cur.rowcount)
        for partition, epoch, remaining in taken:
            deadline, lapsed_by = self._deadline(sent, remaining), self._lapsed_by(remaining)
            self.owned[partition] = Lease(partition, epoch, deadline, lapsed_by)
            change.gained[partition] = epoch

    async def release(
        self, conn: AsyncConnection[Any], partitions: Iterable[int] | None = None
    ) -> list[int]:
        """Give up ``partitions`` (default: all held) so another node can take them at once.

        Call it once their running handlers have ended: rows still RUNNING there are run again
        by the next owner. Other nodes are told by NOTIFY. Returns the partitions released.
        """
        return await self.release_detached(conn, self.detach(partitions))

    def detach(self, partitions: Iterable[int] | None = None) -> dict[str, Any]:
        """Stop holding ``partitions`` (default: all) in this node's memory at once, before
        any await, so that no attempt starts there while the release is on its way; the
        result is what :meth:`release_detached` sends."""
        chosen = list(self.owned) if partitions is None else list(partitions)
        params = self._pairs(chosen)
        for partition in params["parts"]:
            del self.owned[partition]
        return params

    async def release_detached(
        self, conn: AsyncConnection[Any], params: dict[str, Any]
    ) -> list[int]:
        """The release statement of what :meth:`detach` gave up (see :meth:`release`)."""
        if not params["parts"]:
            return []
        async with conn.transaction():
            cur = await conn.execute(_RELEASE, params)
            released = sorted(int(p) for (p,) in await cur.fetchall())
            await conn.execute(_NOTIFY, (NOTIFY_CHANNEL, RELEASED))
        return released

    async def leave(self, conn: AsyncConnection[Any]) -> list[int]:
        """Release everything and remove this node from the live nodes (on close)."""
        released = await self.release(conn)
        await conn.execute(_LEAVE, {"node": self.node})
        return released
