"""``status``, ``list`` and ``show`` on a PostgreSQL journal.

They read the database, never a node's memory, through the synchronous client, so they work
while any number of nodes run. The output has the SQLite commands' shape where the data exists
(``--json`` keys included); what only PostgreSQL has comes in addition: partitions with their
owners, epochs and leases, the nodes, a row's partition and run epoch. What PostgreSQL does not
have is left out rather than faked: there is no record log, so no record counts, no compaction,
and ``show`` prints the timer's current row (with when and in which change it last changed)
instead of a history. Due and overdue are judged by the database's clock, the one the nodes
fire by.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from wheel_engine.cli.common import row_to_dict
from wheel_engine.cli.output import (
    EXIT_OK,
    EXIT_PROBLEM,
    EXIT_USAGE,
    CliError,
    Output,
    fmt_age,
    fmt_duration,
)
from wheel_engine.cli.pg import mask_url
from wheel_engine.cli.pg.connection import connected, guarded
from wheel_engine.cli.pg.views import partition_groups, partition_view
from wheel_engine.cli.read import LIVE, STATES, _limit, print_handlers, print_listing, timer_pairs

if TYPE_CHECKING:
    from journal.postgres import PostgresClient, StoredTimer
    from journal.postgres.inspection import DueEdges, PartitionRow
    from journal.postgres.limiting import BucketRow

__all__ = ["cmd_list", "cmd_show", "cmd_status"]


def _edge(edge: tuple[str, str, float] | None, now: float) -> dict[str, Any] | None:
    if edge is None:
        return None
    key, handler, due = edge
    return {"key": key, "handler": handler, "due": due, "late_seconds": max(0.0, now - due)}


def _next(edge: tuple[str, str, float] | None) -> dict[str, Any] | None:
    return None if edge is None else {"key": edge[0], "handler": edge[1], "due": edge[2]}


def _unhandled(handlers: dict[str, dict[str, int]], known: set[str] | None) -> list[str] | None:
    """Handlers with live timers that are not in ``known`` (None: not asked)."""
    if known is None:
        return None
    return sorted(
        name
        for name, counts in handlers.items()
        if name not in known and any(counts[s] for s in LIVE)
    )


def _status_data(client: PostgresClient, shown: str, known: set[str] | None) -> dict[str, Any]:
    handlers = {
        name: {str(state): n for state, n in counts.items()}
        for name, counts in client.handler_counts().items()
    }
    states = {s: sum(counts[s] for counts in handlers.values()) for s in STATES}
    edges: DueEdges = client.due_edges()
    partitions: list[PartitionRow] = client.partition_table()
    live_nodes = [n.node for n in client.nodes() if n.alive_until > edges.now]
    unhandled = _unhandled(handlers, known)
    owners: dict[str, int] = {}
    for p in partitions:
        if p.owner is not None and p.lease_until > edges.now:
            owners[p.owner] = owners.get(p.owner, 0) + 1
    return {
        "journal": shown,
        "backend": "postgresql",
        "schema_version": client.schema_version(),
        "db_now": edges.now,
        "max_version": client.last_version(),
        "timers": sum(states.values()),
        "states": states,
        "handlers": handlers,
        "overdue": edges.overdue,
        "oldest_overdue": _edge(edges.oldest_overdue, edges.now),
        "next_due": _next(edges.next_due),
        "unhandled": None
        if unhandled is None
        else sum(handlers[h][s] for h in unhandled for s in LIVE),
        "unhandled_handlers": unhandled,
        "partition_count": len(partitions),
        "owners": dict(sorted(owners.items())),
        "live_nodes": live_nodes,
        "partitions": [partition_view(p, edges.now) for p in partitions],
        "limits": {row.handler: _limit_view(row) for row in client.limits()},
    }


def _limit_view(row: BucketRow) -> dict[str, Any]:
    """A handler's cluster-wide limits, its tokens now and its running attempts."""
    return {
        "scope": "cluster",
        "concurrency": row.concurrency,
        "rate": row.rate,
        "burst": row.burst,
        "tokens": None if row.tokens is None else round(row.tokens, 3),
        "running": row.running,
    }


def _status_pairs(data: dict[str, Any]) -> list[tuple[str, Any]]:
    now = data["db_now"]
    pairs: list[tuple[str, Any]] = [
        ("journal", data["journal"]),
        ("backend", f"PostgreSQL, schema_version {data['schema_version']}"),
        ("timers", data["timers"]),
        ("last version", data["max_version"]),
        *((state.lower(), data["states"][state]) for state in STATES),
    ]
    first = data["oldest_overdue"]
    if first is None:
        pairs.append(("overdue", 0))
    else:
        late = fmt_duration(first["late_seconds"])
        pairs.append(
            (
                "overdue",
                f"{data['overdue']}; oldest {first['key']} ({first['handler']}) {late} late",
            )
        )
    if data["next_due"] is not None:
        pairs.append(
            ("next due", f"{data['next_due']['key']} {fmt_age(data['next_due']['due'], now)}")
        )
    if data["unhandled"] is None:
        pairs.append(("unhandled", "unknown here: pass --handlers h1,h2 (the registered names)"))
    else:
        names = ", ".join(data["unhandled_handlers"]) or "-"
        pairs.append(("unhandled", f"{data['unhandled']} (handlers: {names})"))
    held = sum(data["owners"].values())
    pairs.append(("partitions", f"{data['partition_count']}; {held} held under a live lease"))
    pairs.append(
        ("live nodes", f"{len(data['live_nodes'])}: {', '.join(data['live_nodes']) or '-'}")
    )
    return pairs


@guarded
def cmd_status(args: argparse.Namespace, out: Output) -> int:
    known = None
    if args.handlers is not None:
        known = {h.strip() for h in args.handlers.split(",") if h.strip()}
    with connected(args.db) as client:
        data = _status_data(client, mask_url(args.db), known)
    if out.json_mode:
        out.json(data)
        return EXIT_OK
    out.fields(_status_pairs(data), title=f"wheel-engine journal {data['journal']}")
    print_handlers(out, data["handlers"])
    out.line()
    out.table(
        ["owner", "partitions", "count", "epochs", "lease"],
        partition_groups(data["partitions"]),
        title="partitions (leases on the database's clock)",
        right=["count"],
    )
    if data["limits"]:
        out.line()
        out.table(
            ["handler", "concurrency", "rate", "burst", "tokens", "running"],
            [
                [
                    name,
                    *(_dash(view[k]) for k in ("concurrency", "rate", "burst", "tokens")),
                    view["running"],
                ]
                for name, view in data["limits"].items()
            ],
            title="limits across the cluster (limit_scope='cluster')",
            right=["concurrency", "rate", "burst", "tokens", "running"],
        )
    return EXIT_OK


def _dash(value: object) -> object:
    return "-" if value is None else value


def _timer_dict(timer: StoredTimer, now: float) -> dict[str, Any]:
    """``row_to_dict`` plus what only a PostgreSQL row has."""
    return {
        **row_to_dict(timer, now=now),
        "partition": timer.partition,
        "run_epoch": timer.run_epoch,
        "cancel_requested": timer.cancel_requested,
        "change_seq": timer.change_seq,
    }


@guarded
def cmd_list(args: argparse.Namespace, out: Output) -> int:
    wanted = args.state.upper() if args.state else None
    if wanted is not None and wanted not in STATES:
        raise CliError(
            f"unknown state {args.state!r}; one of: {', '.join(STATES)}", code=EXIT_USAGE
        )
    limit = _limit(args.limit)
    with connected(args.db) as client:
        rows = client.listing(state=wanted, handler=args.handler, limit=limit)
        full = limit is not None and len(rows) == limit
        total = client.count(state=wanted, handler=args.handler) if full else len(rows)
        now = client.db_now()
    return print_listing(out, [_timer_dict(r, now) for r in rows], max(total, len(rows)), now)


#: What ``show`` says in place of the SQLite journal's history.
NO_HISTORY = (
    "no history: PostgreSQL keeps each timer's current row, not a log of records; "
    "updated_at and change_seq say when it last changed"
)


@guarded
def cmd_show(args: argparse.Namespace, out: Output) -> int:
    shown = mask_url(args.db)
    with connected(args.db) as client:
        timer = client.lookup(args.key)
        if timer is None:
            raise CliError(f"no timer with key {args.key!r} in {shown}", code=EXIT_PROBLEM)
        now = client.db_now()
        partitions = client.partition_table()
    data = _timer_dict(timer, now)
    mine = [p for p in partitions if p.partition == timer.partition]
    data["partition_owner"] = partition_view(mine[0], now) if mine else None
    data["history"] = None  # not kept: see NO_HISTORY
    if out.json_mode:
        out.json(data)
        return EXIT_OK
    pairs = [(name, value) for name, value in timer_pairs(data, now) if name != "partition_owner"]
    pairs.append(("partition owner", _owner_text(timer.partition, data["partition_owner"])))
    out.fields(pairs, title=f"timer {args.key}")
    out.line()
    out.line(NO_HISTORY)
    return EXIT_OK


def _owner_text(partition: int, view: dict[str, Any] | None) -> str:
    if view is None:
        return f"nobody: partition {partition} is missing from wheel_partitions (run check)"
    if view["owner"] is None:
        return f"no node yet (partition {partition} is free)"
    state = "holds it" if view["held"] else "held it; its lease lapsed, no node took it yet"
    return f"{view['owner']} ({state}, epoch {view['epoch']}, lease {view['lease']})"
