"""``Engine.stats()``: the figures of the engine's parts, gathered in one dict."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from wheel_engine._build import compiled

if TYPE_CHECKING:
    from wheel_engine.commits import Commits
    from wheel_engine.dispatcher import Dispatcher
    from wheel_engine.stats import Counters
    from wheel_engine.timers import TimerTable

__all__ = ["engine_stats"]


def engine_stats(
    table: TimerTable, dispatcher: Dispatcher, counters: Counters, commits: Commits
) -> dict[str, Any]:
    """``Engine.stats()``: O(1) but for the lag percentiles (metrics scrape it on a live loop)
    and per limited handler (``limits``: its limits, running, waiting, ``throttled``)."""
    limits = dispatcher.limits
    flow = {"throttled": limits.throttled(), "limits": limits.describe()}
    return {
        "pending": table.pending(),
        "running": dispatcher.running,
        "dead": len(table.dead),
        "unhandled": table.parked(),
        "unhandled_handlers": sorted(table.unhandled),
        **counters.as_dict(),
        "journal_records": commits.journal.tail_records,  # 0 where nothing is compacted
        "last_compaction": commits.last_compaction,
        "compiled": compiled(),  # which build runs: wheel_engine._build, computed once
        **flow,
    }
