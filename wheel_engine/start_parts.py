"""A start group's parts: what commits apart, so no handler waits for another's claim (#26).

A start group (:meth:`~wheel_engine.starting.StartQueue.take`) is committed as one part where
every attempt is claimed the same way: in memory, on SQLite, and on PostgreSQL while no handler
is limited with ``limit_scope="cluster"``. A cluster-limited handler's attempts are claimed
through its row in the database (:mod:`wheel_engine.nodes.limited`), a round trip of its own
that may refuse them; were they committed with the rest of the group, every other timer of the
group would start only once that claim answered. So while such a handler is registered, a
group is split (:func:`split_group`) into the **plain part** (every handler not limited across
the cluster) and **one part per cluster-limited handler**; each part is committed, refused in
part, given back on failure and run on its own, as soon as its own claim answers. Successors
(#25) go with their predecessor's part: recurring's occurrences, the only timers with one, run
under a derived handler that has no limits, so they are always in the plain part (a limited
claim inserts no successor).

The test of whether to split is one of a set's truth (``Limits.cluster``): the groups of every
other engine never pay for the split.
"""

from __future__ import annotations

from collections.abc import Set

from wheel_engine.timer import Timer

__all__ = ["Part", "split_group"]


class Part:
    """One part of a start group: its plain handlers to run on the loop, and its timers for
    the worker slots, each in the group's order. ``plain``: the plain part, whose plain handlers
    are the one inline group under way (a cluster-limited part's hold no other group back)."""

    __slots__ = ("inline", "plain", "pooled")

    def __init__(self, plain: bool) -> None:
        self.inline: list[Timer] = []
        self.pooled: list[Timer] = []
        self.plain = plain


def split_group(inline: list[Timer], pooled: list[Timer], cluster: Set[str]) -> list[Part]:
    """The group's parts: the plain one first (if it holds any timer), then one per handler in
    ``cluster`` (the cluster-limited handlers) that has timers in the group."""
    plain = Part(True)
    limited: dict[str, Part] = {}
    for timer in inline:
        _part_of(timer.handler, plain, limited, cluster).inline.append(timer)
    for timer in pooled:
        _part_of(timer.handler, plain, limited, cluster).pooled.append(timer)
    parts = [plain] if plain.inline or plain.pooled else []
    parts.extend(limited.values())
    return parts


def _part_of(handler: str, plain: Part, limited: dict[str, Part], cluster: Set[str]) -> Part:
    if handler not in cluster:
        return plain
    part = limited.get(handler)
    if part is None:
        part = limited[handler] = Part(False)
    return part
