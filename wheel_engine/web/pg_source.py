"""The console over a PostgreSQL journal: the database answers every read, at its own clock. It
reuses the CLI's reads (:class:`journal.postgres.PostgresClient`: one timer, partitions, nodes,
the clock) and adds what the console needs that the client has not: a keyset page of the timers
list, the DEAD timers a filter names, and the overview (:mod:`.pg_overview`, cached). PostgreSQL
keeps no record log, so a timer's "history" is its current row with when and on which node epoch
it last ran. The connection is used by one worker thread at a time (the app runs every source
call on a single thread). The client is the CLI's; the console's own statements run on a second
connection, opened the same way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from journal.postgres.rows import COLUMNS, stored
from journal.postgres.states import DEAD_CODE
from journal.state import STATE_CODE
from wheel_engine.cli.pg import mask_url
from wheel_engine.web.pg_overview import CachedOverview
from wheel_engine.web.source import Query, timer_data

if TYPE_CHECKING:
    from journal.postgres import PostgresClient

__all__ = ["PostgresSource"]

_PAGE: Final = (
    f"SELECT {COLUMNS} FROM wheel_timers t"
    " WHERE (%(after)s::text IS NULL OR t.key > %(after)s::text)"
    " AND (%(prefix)s::text IS NULL OR starts_with(t.key, %(prefix)s::text))"
    " AND (%(state)s::smallint IS NULL OR t.state = %(state)s::smallint)"
    " AND (%(handler)s::text IS NULL OR t.handler = %(handler)s::text)"
    " ORDER BY t.key LIMIT %(limit)s::bigint"
)
_DEAD_KEYS: Final = (
    f"SELECT key FROM wheel_timers WHERE state = {DEAD_CODE}"
    " AND (%(handler)s::text IS NULL OR handler = %(handler)s::text)"
    " AND (%(prefix)s::text IS NULL OR starts_with(key, %(prefix)s::text)) ORDER BY key"
)


class PostgresSource:
    kind = "postgresql"

    def __init__(self, url: str, *, show_payloads: bool = False) -> None:
        import psycopg

        from journal.postgres.client import PostgresClient

        self.name = mask_url(url)
        self.show_payloads = show_payloads
        self.client: PostgresClient = PostgresClient.connect(url)  # checks it is a journal
        # The console's own statements run on a connection of their own: the client's is its.
        self._conn: Any = psycopg.connect(
            url, autocommit=True, prepare_threshold=None, connect_timeout=10
        )
        self._overview = CachedOverview(url)

    def overview(self) -> dict[str, Any]:
        return self._overview.get(self._conn)

    def timers(self, query: Query) -> dict[str, Any]:
        params = {
            "after": query.after,
            "prefix": query.prefix or None,
            "state": None if query.state is None else STATE_CODE[query.state],
            "handler": query.handler,
            "limit": query.limit + 1,
        }
        rows = [stored(r) for r in self._conn.execute(_PAGE, params).fetchall()]
        now = self.client.db_now()
        more = len(rows) > query.limit
        rows = rows[: query.limit]
        return {
            "timers": [self._timer(r, now) for r in rows],
            "next_after": rows[-1].key if more and rows else None,
            "query": {
                "state": query.state,
                "handler": query.handler,
                "prefix": query.prefix,
                "after": query.after,
                "limit": query.limit,
            },
        }

    def _timer(self, row: Any, now: float) -> dict[str, Any]:
        data = timer_data(row, now, self.show_payloads)
        data["partition"] = row.partition
        data["run_epoch"] = row.run_epoch
        data["cancel_requested"] = row.cancel_requested
        return data

    def timer(self, key: str) -> dict[str, Any] | None:
        row = self.client.lookup(key)
        if row is None:
            return None
        return {
            "key": key,
            "timer": self._timer(row, self.client.db_now()),
            "history": [],
            "history_complete": False,
        }

    def nodes(self) -> dict[str, Any]:
        now = self.client.db_now()
        nodes = [
            {"node": n.node, "alive": n.alive_until > now, "alive_for": n.alive_until - now}
            for n in self.client.nodes()
        ]
        partitions = [
            {
                "partition": p.partition,
                "owner": p.owner,
                "epoch": p.epoch,
                "held": p.owner is not None and p.lease_until > now,
                "lease_left": p.lease_until - now,
                "lease_age": None if p.acquired_at is None else now - p.acquired_at,
            }
            for p in self.client.partition_table()
        ]
        return {"now": now, "nodes": nodes, "partitions": partitions}

    def dead_keys(self, query: Query) -> list[str]:
        params = {"handler": query.handler, "prefix": query.prefix or None}
        return [str(r[0]) for r in self._conn.execute(_DEAD_KEYS, params).fetchall()]

    def row(self, key: str) -> Any:
        return self.client.lookup(key)

    def close(self) -> None:
        self._conn.close()
        self.client.close()
