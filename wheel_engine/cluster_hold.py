"""A cluster-limited handler's gate holds (``limit_scope="cluster"``, :mod:`.nodes.limited`).

The database may refuse a gate's timers for two unrelated reasons, and each sets a hold of its
own on the gate (:class:`ClusterHold`), during which the gate moves none of its line to the
starter's queue:

- **slot**: every slot of the cluster was taken. A slot freed on another node is not announced
  here, so the gate asks again after a while; one freed on this node ends the hold at once
  (``Limits.release``: that slot is the cluster's too);
- **row**: another node's claim of the handler held its row (for one round trip). An attempt
  ending here frees a slot and says nothing about the row, so it never ends this hold: asking
  again at once would find the row still held, and each such claim is a round trip. The row
  counts as held too while **this node's** claim of the handler is on its way
  (``ClusterHold.claims``): a second claim sent meanwhile would find it held by the first, and
  its timers would be refused and wait out a ``ROW_RETRY`` for nothing; the first's answer
  wakes the line. Both count in ``stats()``'s ``waiting_row``.

In memory and on SQLite no hold is ever set (``"cluster"`` is refused there).
"""

from __future__ import annotations

__all__ = ["ClusterHold"]


class ClusterHold:
    """Until when a gate waits for a free slot of the cluster and for its row, on the node's
    clock (0.0: not held)."""

    __slots__ = ("claims", "row_until", "slot_until")

    def __init__(self) -> None:
        self.slot_until = 0.0
        self.row_until = 0.0
        self.claims = 0  # this node's claims of the handler on their way to the database

    def until(self) -> float:
        """When both holds have ended."""
        return max(self.slot_until, self.row_until)

    def blocking(self, now: float) -> str | None:
        """What holds the gate at ``now``: ``"row"``, ``"slot"``, or None."""
        if self.claims or now < self.row_until:
            return "row"
        if now < self.slot_until:
            return "slot"
        return None
