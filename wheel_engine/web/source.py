"""What the console reads, as plain JSON-ready data: one shape for a journal file and for
PostgreSQL, so every page and its ``/api/`` twin render the same dictionaries.

:class:`Source` is the interface; :class:`SqliteSource` answers from a :class:`JournalView`
(counts kept in memory, refreshed from the journal's tail) and
:class:`~wheel_engine.web.pg_source.PostgresSource` from the database. Payloads leave a source
only when the console was started with ``--show-payloads``; otherwise a timer carries
``"payload_hidden": true`` instead, and so does every history record that held one.
"""

from __future__ import annotations

import copy
import math
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Final, Protocol

from journal.reader import history_sync
from journal.state import STATES, TimerRow, TimerState
from wheel_engine.cli.common import decode_payload
from wheel_engine.cli.output import fmt_time
from wheel_engine.stats import percentiles
from wheel_engine.web.view import JournalView, ViewState, first_line

__all__ = [
    "DAY_BUCKETS",
    "HOUR_BUCKETS",
    "PAGE_SIZE",
    "Query",
    "Source",
    "SqliteSource",
    "timer_data",
]

#: The chart's buckets: 12 of 5 minutes over the next hour, 24 of 1 hour over the next day.
HOUR_BUCKETS: Final = (12, 300.0)
DAY_BUCKETS: Final = (24, 3600.0)
PAGE_SIZE: Final = 50
MAX_PAGE: Final = 500
#: Most rows of "DEAD by handler and last error" shown.
DEAD_GROUPS: Final = 20
STATE_NAMES: Final = tuple(str(s) for s in STATES)


@dataclass(frozen=True, slots=True)
class Query:
    """A filter of the timers list; ``after`` is the last key of the previous page."""

    state: str | None = None
    handler: str | None = None
    prefix: str | None = None
    after: str | None = None
    limit: int = PAGE_SIZE

    def matches(self, handler: str, state: str) -> bool:
        return (self.state is None or state == self.state) and (
            self.handler is None or handler == self.handler
        )


class Source(Protocol):
    kind: str  #: "sqlite" or "postgresql"
    name: str  #: what the pages call the journal (a URL with its password masked)

    def overview(self) -> dict[str, Any]: ...
    def timers(self, query: Query) -> dict[str, Any]: ...
    def timer(self, key: str) -> dict[str, Any] | None: ...
    def nodes(self) -> dict[str, Any] | None: ...
    def dead_keys(self, query: Query) -> list[str]: ...
    def row(self, key: str) -> Any: ...
    def close(self) -> None: ...


def timer_data(row: Any, now: float, show_payloads: bool) -> dict[str, Any]:
    """A timer row (journal or PostgreSQL) as the pages and the API show it."""
    state = str(row.state)
    data: dict[str, Any] = {
        "key": row.key,
        "version": row.version,
        "handler": row.handler,
        "state": state,
        "due": row.due,
        "due_utc": fmt_time(row.due),
        "overdue_seconds": max(0.0, now - row.due) if state == "PENDING" else 0.0,
        "attempts": row.attempts,
        "last_error": row.last_error,
        "first_attempt_at": row.first_attempt_at,
        "updated_at": row.updated_at,
    }
    _payload(data, row.payload, show_payloads)
    return data


def _payload(data: dict[str, Any], payload: bytes | None, show: bool) -> None:
    if show:
        data["payload"] = decode_payload(payload)
    elif payload is not None:
        data["payload_hidden"] = True


def buckets(dues: Any, now: float, count: int, width: float) -> list[int]:
    """How many of the sorted ``(due, ...)`` entries fall in each of ``count`` windows."""
    edges = [dues.bisect_right((now + i * width, math.inf)) for i in range(count + 1)]
    return [edges[i + 1] - edges[i] for i in range(count)]


def summary_stats(samples: dict[str, Any]) -> dict[str, dict[str, float | int]]:
    """p50, p99 and max of each handler's recent samples (seconds)."""
    out: dict[str, dict[str, float | int]] = {}
    for handler, values in sorted(samples.items()):
        if values:
            p50, p99 = percentiles(values, (0.5, 0.99))
            out[handler] = {"p50": p50, "p99": p99, "max": max(values), "n": len(values)}
    return out


def by_handler(counts: Iterable[tuple[tuple[str, str], int]]) -> dict[str, dict[str, int]]:
    """``{handler: {state: n}}`` with every state present, handlers sorted."""
    table: dict[str, dict[str, int]] = {}
    for (handler, state), n in counts:
        if n:
            table.setdefault(handler, dict.fromkeys(STATE_NAMES, 0))[state] += n
    return dict(sorted(table.items()))


def dead_groups(counts: Iterable[tuple[tuple[str, str], int]]) -> list[dict[str, Any]]:
    """The largest groups of DEAD timers by handler and last error."""
    groups = [(n, h, e) for (h, e), n in counts if n > 0]
    groups.sort(key=lambda g: (-g[0], g[1], g[2]))
    return [{"handler": h, "error": e, "count": n} for n, h, e in groups[:DEAD_GROUPS]]


def overview_data(
    now: float,
    handlers: dict[str, dict[str, int]],
    overdue: int,
    hour: list[int],
    day: list[int],
    dead: list[dict[str, Any]],
) -> dict[str, Any]:
    states = {s: sum(c[s] for c in handlers.values()) for s in STATE_NAMES}
    return {
        "now": now,
        "now_utc": fmt_time(now),
        "timers": sum(states.values()),
        "states": states,
        "handlers": handlers,
        "due": {
            "overdue": overdue,
            "next_hour": hour,
            "next_hour_bucket_seconds": HOUR_BUCKETS[1],
            "next_day": day,
            "next_day_bucket_seconds": DAY_BUCKETS[1],
        },
        "dead": dead,
    }


class SqliteSource:
    """A journal file, read through :class:`JournalView` (read-only; works while an engine
    runs on it)."""

    kind = "sqlite"

    def __init__(self, path: str, *, show_payloads: bool = False) -> None:
        self.name = path
        self.path = path
        self.show_payloads = show_payloads
        self.view = JournalView(path)

    def overview(self) -> dict[str, Any]:
        state = self.view.read()
        now = time.time()
        pending = state.pending
        overdue = pending.bisect_right((now, math.inf))
        handlers = by_handler(((h, str(s)), n) for (h, s), n in state.counts.items())
        data = overview_data(
            now,
            handlers,
            overdue,
            buckets(pending, now, *HOUR_BUCKETS),
            buckets(pending, now, *DAY_BUCKETS),
            dead_groups(state.dead.items()),
        )
        data["lateness"] = summary_stats(state.lateness)
        data["duration"] = summary_stats(state.duration)
        data["journal"] = {"last_seq": state.last_seq, "snapshot_seq": state.snapshot_seq}
        data["engine"] = engine_status(self.path)
        return data

    def timers(self, query: Query) -> dict[str, Any]:
        state = self.view.read()
        now = time.time()
        rows: list[dict[str, Any]] = []
        last: str | None = None
        more = False
        for key in _keys_from(state, query):
            row = state.timers[key]
            if not query.matches(row.handler, str(row.state)):
                continue
            if len(rows) == query.limit:
                more = True
                break
            rows.append(timer_data(row, now, self.show_payloads))
            last = key
        return {"timers": rows, "next_after": last if more else None, "query": _query(query)}

    def timer(self, key: str) -> dict[str, Any] | None:
        state = self.view.read()
        now = time.time()
        row = state.timers.get(key)
        history = history_sync(self.path, key)
        if row is None and not history:
            return None
        data: dict[str, Any] = {"key": key, "timer": None}
        if row is not None:
            data["timer"] = timer_data(row, now, self.show_payloads)
        data["history"] = [self._record(seq, rec) for seq, rec in history]
        data["history_complete"] = state.snapshot_seq == 0
        return data

    def _record(self, seq: int, record: Any) -> dict[str, Any]:
        fields = dict(record._asdict())
        fields.pop("key", None)
        payload = fields.pop("payload", None)
        item: dict[str, Any] = {"seq": seq, "kind": type(record).__name__.upper(), **fields}
        if "error" in item:
            item["error_line"] = first_line(item["error"])
        for name in ("at", "due"):
            if isinstance(item.get(name), float | int):
                item[f"{name}_utc"] = fmt_time(item[name])
        if item["kind"] == "SCHEDULE":
            _payload(item, payload, self.show_payloads)
        return item

    def nodes(self) -> dict[str, Any] | None:
        return None

    def dead_keys(self, query: Query) -> list[str]:
        state = self.view.read()
        only_dead = Query(TimerState.DEAD.value, query.handler, query.prefix, None, 0)
        return [
            key
            for key in _keys_from(state, only_dead)
            if only_dead.matches(state.timers[key].handler, str(state.timers[key].state))
        ]

    def row(self, key: str) -> TimerRow | None:
        """A copy of the key's row, payload bytes included (for run-now's reschedule)."""
        row = self.view.read().timers.get(key)
        return None if row is None else copy.copy(row)

    def close(self) -> None:
        self.view.close()


def engine_status(path: str) -> dict[str, Any] | None:
    """The running engine's own counters and lateness, through its admin socket (``status``),
    or None when no engine serves one. A short timeout: the overview never waits on it."""
    from wheel_engine.admin.client import request
    from wheel_engine.admin.protocol import AdminError, admin_path

    try:
        answer = request(admin_path(path), "status", timeout=1.0, owner=os.stat(path).st_uid)
    except (AdminError, OSError):
        return None
    stats = answer.get("stats") or {}
    wanted = ("fired", "succeeded", "retried", "dead", "lag_p50", "lag_p99", "lag_max")
    return {"pid": answer.get("pid"), **{k: stats.get(k) for k in wanted}}


def _keys_from(state: ViewState, query: Query) -> Iterator[str]:
    """Keys in order from the page's start: after ``query.after``, within ``query.prefix``
    (only the keys of ``query.state`` when that state has a list of its own)."""
    keys = state.keys
    if query.state is not None:
        keys = state.by_state.get(TimerState(query.state), keys)
    prefix = query.prefix or ""
    start = keys.bisect_left(prefix)
    if query.after is not None and query.after >= prefix:
        start = max(start, keys.bisect_right(query.after))
    for key in keys.islice(start):
        if not key.startswith(prefix):
            return
        yield key


def _query(query: Query) -> dict[str, Any]:
    return {
        "state": query.state,
        "handler": query.handler,
        "prefix": query.prefix,
        "after": query.after,
        "limit": query.limit,
    }
