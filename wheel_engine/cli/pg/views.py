"""Partitions as plain data for ``status`` and ``show``, and grouped by owner for people.

A partition is *held* while its owner's lease is in the future by the database's clock; a
partition whose lease lapsed keeps its last owner's name (and epoch) until a node takes it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from wheel_engine.cli.output import fmt_duration

if TYPE_CHECKING:
    from journal.postgres.inspection import PartitionRow

__all__ = ["partition_groups", "partition_view", "ranges"]


def _lease_text(owner: str | None, left: float) -> str:
    if owner is None:
        return "-"
    return f"{fmt_duration(left)} left" if left > 0 else f"lapsed {fmt_duration(-left)} ago"


def partition_view(p: PartitionRow, now: float) -> dict[str, Any]:
    """One partition as JSON-ready data; ``now`` is the database's clock."""
    left = p.lease_until - now
    return {
        "partition": p.partition,
        "owner": p.owner,
        "epoch": p.epoch,
        "lease_until": p.lease_until if p.owner is not None else None,
        "lease_left_seconds": round(left, 3) if p.owner is not None else None,
        "held": p.owner is not None and left > 0,
        "acquired_at": p.acquired_at,
        "lease": _lease_text(p.owner, left),
    }


def ranges(numbers: Iterable[int]) -> str:
    """``0-15, 32, 40-47`` for sorted partition numbers."""
    spans: list[list[int]] = []
    for n in numbers:
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def partition_groups(views: list[dict[str, Any]]) -> list[list[Any]]:
    """Table rows ``owner, partitions, count, epochs, lease``: one per owner and lease state,
    held ones first; the lease column shows the soonest expiry (or the oldest lapse)."""
    groups: dict[tuple[bool, str], list[dict[str, Any]]] = {}
    for view in views:
        if view["owner"] is None:
            name = "(free)"
        else:
            name = view["owner"] if view["held"] else f"{view['owner']} (lapsed)"
        groups.setdefault((not view["held"], name), []).append(view)
    rows: list[list[Any]] = []
    for (_, name), members in sorted(groups.items()):
        epochs = sorted({m["epoch"] for m in members})
        soonest = min(members, key=lambda m: m["lease_left_seconds"] or 0.0)
        rows.append(
            [
                name,
                ranges(m["partition"] for m in members),
                len(members),
                str(epochs[0]) if len(epochs) == 1 else f"{epochs[0]}-{epochs[-1]}",
                soonest["lease"],
            ]
        )
    return rows
