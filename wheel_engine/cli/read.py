"""The reading commands: ``status``, ``list``, ``show``, ``check``.

They open the journal read-only, so they work while an engine is running on it, and they never
change a byte of it. What they show is the journal's committed state: a timer an engine is
running right now shows as RUNNING (an attempt is committed, its outcome is not yet). ``status``
also shows what a running engine says of itself (its limits: :mod:`wheel_engine.cli.live`).
"""

from __future__ import annotations

import argparse
import sqlite3
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from journal.errors import JournalCorrupt, JournalError
from journal.recovery import as_journaled
from journal.state import TimerState
from wheel_engine.cli.common import (
    decode_payload,
    existing_journal,
    open_readonly,
    row_to_dict,
    translate_error,
    with_path,
)
from wheel_engine.cli.live import ask_engine, print_live
from wheel_engine.cli.output import (
    EXIT_OK,
    EXIT_PROBLEM,
    CliError,
    Output,
    fmt_age,
    fmt_bytes,
    fmt_duration,
    fmt_json,
    fmt_time,
)

if TYPE_CHECKING:
    from journal.reader import JournalInfo

__all__ = [
    "cmd_check",
    "cmd_list",
    "cmd_show",
    "cmd_status",
    "print_handlers",
    "print_listing",
    "timer_pairs",
]

STATES = tuple(state.value for state in TimerState)  # the journal's, in its order
LIVE = tuple(state.value for state in TimerState if state.is_live)  # PENDING, RUNNING


async def _recover(journal: Any, out: Output, path: str) -> Any:
    """Rebuild the state from the journal, with a progress bar for big journals."""
    with out.progress(f"reading {path}") as bar:

        def progress(done: int, total: int | None = None) -> None:
            bar.update(done, total)

        try:
            recovered = await journal.recover(progress=progress)
        except (JournalError, sqlite3.DatabaseError, OSError) as exc:
            raise translate_error(path, exc) from exc
    return as_journaled(recovered)  # what the journal says, not what a restart would do


def _last_compaction(info: JournalInfo, now: float) -> str:
    """When the snapshot was last folded, and how far it reaches."""
    if not info.snapshot_seq:
        return "never"
    reach = f"folded records up to #{info.snapshot_seq} of {info.last_seq}"
    if info.compacted_at is None:  # compacted by an engine that kept no time of it
        return f"{reach} (no time recorded)"
    return f"{fmt_time(info.compacted_at)} ({fmt_age(info.compacted_at, now)}); {reach}"


async def cmd_status(args: argparse.Namespace, out: Output) -> int:
    now = time.time()
    async with open_readonly(args.db) as journal:
        try:
            info = await journal.info()
        except (JournalError, sqlite3.DatabaseError, OSError) as exc:
            raise translate_error(args.db, exc) from exc
        recovered = await _recover(journal, out, args.db)
    rows = list(recovered.timers.values())
    states = Counter(r.state.value for r in rows)
    by_handler: dict[str, Counter[str]] = {}
    for r in rows:
        by_handler.setdefault(r.handler, Counter())[r.state.value] += 1
    live = [r for r in rows if r.state.is_live]
    overdue = sorted(
        (r for r in live if r.due <= now and r.state is TimerState.PENDING),
        key=lambda r: (r.due, r.version),
    )
    upcoming = sorted((r for r in live if r.due > now), key=lambda r: (r.due, r.version))
    known: set[str] | None = None
    if args.handlers is not None:
        known = {h.strip() for h in args.handlers.split(",") if h.strip()}
    unhandled = None if known is None else [r for r in live if r.handler not in known]

    data: dict[str, Any] = {
        "journal": str(Path(args.db).resolve()),
        "file_bytes": info.file_bytes + info.wal_bytes,
        "records": info.snapshot_rows + info.tail_records,
        "snapshot_rows": info.snapshot_rows,
        "tail_records": info.tail_records,
        "last_seq": info.last_seq,
        "compacted_through_seq": info.snapshot_seq,
        "compacted_at": info.compacted_at,
        "max_version": recovered.max_version,
        "timers": len(rows),
        "states": {state: states.get(state, 0) for state in STATES},
        "handlers": {
            name: {state: counts.get(state, 0) for state in STATES}
            for name, counts in sorted(by_handler.items())
        },
        "overdue": len(overdue),
        "oldest_overdue": None,
        "next_due": None,
        "unhandled": None if unhandled is None else len(unhandled),
        "unhandled_handlers": None if unhandled is None else sorted({r.handler for r in unhandled}),
    }
    if overdue:
        first = overdue[0]
        data["oldest_overdue"] = {
            "key": first.key,
            "handler": first.handler,
            "due": first.due,
            "late_seconds": now - first.due,
        }
    if upcoming:
        data["next_due"] = {"key": upcoming[0].key, "due": upcoming[0].due}
    data.update(ask_engine(args.db))  # the running engine's own figures: its limits among them

    if out.json_mode:
        out.json(data)
        return EXIT_OK
    pairs: list[tuple[str, Any]] = [
        ("journal", data["journal"]),
        ("size", fmt_bytes(data["file_bytes"])),
        (
            "records",
            f"{data['records']} ({info.snapshot_rows} in the snapshot, "
            f"{info.tail_records} appended since)",
        ),
        ("timers", data["timers"]),
        ("last version", data["max_version"]),
        ("last compaction", _last_compaction(info, now)),
    ]
    for state in STATES:
        pairs.append((state.lower(), data["states"][state]))
    if overdue:
        first = overdue[0]
        pairs.append(
            (
                "overdue",
                f"{len(overdue)}; oldest {first.key!s} ({first.handler}) "
                f"{fmt_duration(now - first.due)} late",
            )
        )
    else:
        pairs.append(("overdue", 0))
    if upcoming:
        pairs.append(("next due", f"{upcoming[0].key} {fmt_age(upcoming[0].due, now)}"))
    if unhandled is None:
        pairs.append(("unhandled", "unknown here: pass --handlers h1,h2 (the registered names)"))
    else:
        names = ", ".join(data["unhandled_handlers"]) or "-"
        pairs.append(("unhandled", f"{len(unhandled)} (handlers: {names})"))
    out.fields(pairs, title=f"wheel-engine journal {args.db}")
    print_handlers(out, data["handlers"])
    print_live(out, data)
    return EXIT_OK


def print_handlers(out: Output, handlers: dict[str, dict[str, int]]) -> None:
    """``status``'s table of timers by handler and state (nothing when there are none)."""
    if handlers:
        out.line()
        out.table(
            ["handler", *[s.lower() for s in STATES]],
            [[name, *[counts[s] for s in STATES]] for name, counts in handlers.items()],
            right=[s.lower() for s in STATES],
        )


async def cmd_list(args: argparse.Namespace, out: Output) -> int:
    now = time.time()
    wanted = args.state.upper() if args.state else None
    if wanted is not None and wanted not in STATES:
        raise CliError(f"unknown state {args.state!r}; one of: {', '.join(STATES)}", code=2)
    limit = _limit(args.limit)
    async with open_readonly(args.db) as journal:
        recovered = await _recover(journal, out, args.db)
    rows = [
        r
        for r in recovered.timers.values()
        if (wanted is None or r.state.value == wanted)
        and (args.handler is None or r.handler == args.handler)
    ]
    rows.sort(key=lambda r: (r.due, r.version))
    total = len(rows)
    if limit:
        rows = rows[:limit]
    items = [row_to_dict(r, now=now) for r in rows]
    return print_listing(out, items, total, now)


def print_listing(out: Output, items: list[dict[str, Any]], total: int, now: float) -> int:
    """``list``'s output (also for a PostgreSQL journal): ``items`` of ``total`` matches."""
    if out.json_mode:
        out.json({"total": total, "shown": len(items), "timers": items})
        return EXIT_OK
    if not items:
        out.line("no timers match")
        return EXIT_OK
    out.table(
        ["key", "version", "handler", "state", "due (UTC)", "due in", "attempts", "last error"],
        [
            [
                i["key"],
                i["version"],
                i["handler"],
                i["state"],
                i["due_utc"],
                fmt_age(i["due"], now),
                i["attempts"],
                _short(i["last_error"]),
            ]
            for i in items
        ],
        right=["version", "attempts"],
        nowrap=["key", "state", "due (UTC)"],
    )
    if total > len(items):
        out.note(f"showing {len(items)} of {total} (--limit)")
    return EXIT_OK


def _limit(limit: int | None) -> int | None:
    """``--limit``: N timers at most; 0 (and -1, as 0.1.0 documented it) for no limit."""
    if limit is None or limit in (0, -1):
        return None
    if limit < 0:
        raise CliError(f"--limit {limit}: give a count >= 0 (0: no limit)", code=2)
    return limit


def _short(text: str | None, width: int = 60) -> str | None:
    if text is None:
        return None
    first = text.strip().splitlines()[0] if text.strip() else ""
    return first if len(first) <= width else first[: width - 1] + "…"


def _record_to_dict(seq: int, record: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    as_dict = getattr(record, "_asdict", None)
    if callable(as_dict):
        fields = dict(as_dict())
    fields.pop("key", None)
    if "payload" in fields:
        fields["payload"] = decode_payload(fields["payload"])
    return {"seq": seq, "kind": type(record).__name__.upper(), **fields}


async def cmd_show(args: argparse.Namespace, out: Output) -> int:
    now = time.time()
    async with open_readonly(args.db) as journal:
        recovered = await _recover(journal, out, args.db)
        row = recovered.timers.get(args.key)
        try:
            history = await journal.history(args.key)
        except (JournalError, sqlite3.DatabaseError, OSError) as exc:
            raise translate_error(args.db, exc) from exc
    if row is None and not history:
        raise CliError(f"no timer with key {args.key!r} in {args.db}", code=EXIT_PROBLEM)
    data: dict[str, Any] = row_to_dict(row, now=now) if row is not None else {"key": args.key}
    data["history"] = [_record_to_dict(seq, rec) for seq, rec in history]
    if out.json_mode:
        out.json(data)
        return EXIT_OK
    if row is None:
        out.line(f"{args.key}: no live state (compacted away); its remaining history:")
    else:
        out.fields(timer_pairs(data, now), title=f"timer {args.key}")
    if data["history"]:
        out.line()
        out.table(
            ["seq", "record", "at (UTC)", "details"],
            [
                [
                    h["seq"],
                    h["kind"],
                    fmt_time(h.get("at")),
                    ", ".join(
                        f"{k}={_fmt_field(k, v)}"
                        for k, v in h.items()
                        if k not in ("seq", "kind", "at")
                    ),
                ]
                for h in data["history"]
            ],
            title="history (from the journal)",
            right=["seq"],
        )
    return EXIT_OK


def timer_pairs(data: dict[str, Any], now: float) -> list[tuple[str, Any]]:
    """``show``'s ``name: value`` lines for a timer's fields (also for PostgreSQL)."""
    pairs: list[tuple[str, Any]] = []
    for name, value in data.items():
        if name in ("history", "due_utc", "overdue_seconds"):
            continue
        if name == "due":
            value = f"{fmt_time(value)} ({fmt_age(value, now)})"
        elif name in ("first_attempt_at", "updated_at") and value is not None:
            value = fmt_time(value)
        elif name == "payload":
            value = fmt_json(value)
        pairs.append((name, value))
    return pairs


def _fmt_field(name: str, value: Any) -> str:
    if name == "due" and isinstance(value, (int, float)):
        return fmt_time(value)
    if isinstance(value, str) and name != "payload":
        return _short(value) or ""
    return fmt_json(value)


async def cmd_check(args: argparse.Namespace, out: Output) -> int:
    path = existing_journal(args.db)
    problems: list[str] = []
    recovered: Any = None
    records: int | None = None
    try:
        async with open_readonly(args.db) as journal:
            with out.progress(f"checking {args.db}") as bar:
                report = await journal.check()  # quick_check + decode every row
                records = report.snapshot_rows + report.records
                problems.extend(report.problems)
                if report.ok:

                    def progress(done: int, total: int | None = None) -> None:
                        bar.update(done, total)

                    recovered = await journal.recover(progress=progress)
    except JournalCorrupt as exc:
        where = f"record {exc.seq}" if exc.seq is not None else "the journal"
        problems.append(f"{where} is damaged: {exc}")
    if recovered is not None:
        for row in recovered.timers.values():
            state = row.state.value
            if state not in STATES:
                problems.append(f"timer {row.key!r}: unknown state {state!r}")
            if row.version > recovered.max_version:
                problems.append(
                    f"timer {row.key!r}: version {row.version} above the journal's "
                    f"last version {recovered.max_version}"
                )
            payload = decode_payload(row.payload)
            if isinstance(payload, dict) and set(payload) == {"undecodable"}:
                problems.append(f"timer {row.key!r}: payload is not valid msgpack")
            if len(problems) > 20:
                break
    ok = not problems
    data = {
        "journal": str(path),
        "ok": ok,
        "records": records,
        "timers": None if recovered is None else len(recovered.timers),
        "problems": problems,
    }
    if out.json_mode:
        out.json(data)
    elif ok:
        out.line(f"ok: {data['records']} records decode; {data['timers']} timers rebuilt")
    else:
        out.error(with_path(args.db, problems[0]))
        for more in problems[1:]:
            out.note(f"  also: {more}")
    return EXIT_OK if ok else EXIT_PROBLEM
