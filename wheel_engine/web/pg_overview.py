"""The overview of a PostgreSQL journal, computed by the database and served from a cache.

PostgreSQL has no index that counts: timers by handler and state, the DEAD ones by error and
the pending ones by due time each read every matching row (seconds, on a large journal). So a
request never waits for them: it gets the last overview computed, and when that is older than
``max_age`` seconds it asks for a new one in the background (one at a time, on a connection of
its own).
Only the very first request waits. An idle console costs the database nothing; one watched
page costs one recount per ``max_age``. The overview says how old it is (``age_seconds``).

The counts are three statements: the CLI's ``handler_counts_sync``, and two of the console's
own: every pending timer due within a day (or overdue) by 5-minute bucket, in one scan, and the
DEAD ones by handler and the first line of their error.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Final

from journal.postgres.inspection import handler_counts_sync
from journal.postgres.schema import DB_NOW
from journal.postgres.states import DEAD_CODE, PENDING_CODE
from wheel_engine.web.source import (
    DAY_BUCKETS,
    DEAD_GROUPS,
    HOUR_BUCKETS,
    dead_groups,
    overview_data,
)
from wheel_engine.web.view import ERROR_WIDTH

__all__ = ["CachedOverview"]

log = logging.getLogger(__name__)

_STEP: Final = HOUR_BUCKETS[1]  # 5 minutes: the day's hours are sums of twelve of these
_STEPS: Final = int(DAY_BUCKETS[0] * DAY_BUCKETS[1] / _STEP)
#: Overdue (-1) and every 5-minute bucket of the next day, with the database's clock.
_DUE: Final = (
    f"WITH n AS (SELECT {DB_NOW} AS now)"
    " SELECT n.now, CASE WHEN t.due <= n.now THEN -1"
    "  ELSE floor((t.due - n.now) / %(step)s)::int END AS b, count(*)"
    f" FROM n LEFT JOIN wheel_timers t ON t.state = {PENDING_CODE} AND t.due <= n.now + %(span)s"
    " GROUP BY n.now, b"
)
_DEAD: Final = (
    "SELECT handler, left(split_part(btrim(coalesce(last_error, ''), E' \\n'), E'\\n', 1),"
    f" {ERROR_WIDTH}), count(*) FROM wheel_timers WHERE state = {DEAD_CODE} GROUP BY 1, 2"
    f" ORDER BY 3 DESC, 1, 2 LIMIT {DEAD_GROUPS}"
)


def compute(conn: Any) -> dict[str, Any]:
    """The overview, from the database (three statements on ``conn``)."""
    handlers = {
        name: {str(s): n for s, n in counts.items()}
        for name, counts in handler_counts_sync(conn).items()
    }
    now, overdue, steps = time.time(), 0, [0] * _STEPS
    for db_now, b, n in conn.execute(_DUE, {"step": _STEP, "span": _STEPS * _STEP}).fetchall():
        now = float(db_now)
        if b is None:  # no pending timer at all: the LEFT JOIN's one row
            continue
        if b < 0:
            overdue = int(n)
        else:
            steps[min(int(b), _STEPS - 1)] += int(n)
    per_hour = int(DAY_BUCKETS[1] / _STEP)
    hour = steps[: HOUR_BUCKETS[0]]
    day = [sum(steps[i : i + per_hour]) for i in range(0, _STEPS, per_hour)]
    dead = dead_groups(((h, e), int(n)) for h, e, n in conn.execute(_DEAD).fetchall())
    data = overview_data(float(now), handlers, overdue, hour, day, dead)
    data["lateness"] = {}
    data["duration"] = {}
    return data


class CachedOverview:
    """The last overview, and a background recount when it is older than ``max_age``."""

    def __init__(self, url: str, max_age: float = 10.0) -> None:
        self.url = url
        self.max_age = max_age
        self._lock = threading.Lock()
        self._data: dict[str, Any] | None = None
        self._at = 0.0
        self._worker: threading.Thread | None = None

    def get(self, conn: Any) -> dict[str, Any]:
        """The overview; ``conn`` serves the first one (the caller's connection)."""
        with self._lock:
            data, at = self._data, self._at
        if data is None:
            data = compute(conn)
            with self._lock:
                self._data, self._at, at = data, time.monotonic(), time.monotonic()
        age = time.monotonic() - at
        if age > self.max_age:
            self._recount()
        return {**data, "age_seconds": age}

    def _recount(self) -> None:
        with self._lock:
            if self._worker is not None and self._worker.is_alive():
                return
            self._worker = threading.Thread(target=self._run, name="wheel-web-recount", daemon=True)
            self._worker.start()

    def _run(self) -> None:
        import psycopg

        try:
            with psycopg.connect(self.url, autocommit=True, connect_timeout=10) as conn:
                data = compute(conn)
        except Exception as exc:  # the next request asks again; the old overview stays
            log.warning("recounting the overview failed: %s", type(exc).__name__)
            return
        with self._lock:
            self._data, self._at = data, time.monotonic()
