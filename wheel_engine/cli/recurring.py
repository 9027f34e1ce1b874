"""``wheel-engine recurring DB``: the recurrences a SQLite journal holds. Read-only.

Each line: name, rule (``cron`` in ``tz``, or ``every`` seconds), the due time of its next
pending occurrence, and the state of its latest finished one (its last outcome).
"""

from __future__ import annotations

import argparse
from typing import Any

from journal.state import TimerState
from wheel_engine.cli.common import decode_payload, open_readonly
from wheel_engine.cli.output import EXIT_OK, Output, fmt_time
from wheel_engine.recurring.records import RULE_HANDLER, user_handler
from wheel_engine.recurring.rule import occurrence_of

__all__ = ["cmd_recurring", "recurrence_rows"]


def recurrence_rows(timers: dict[str, Any]) -> list[dict[str, Any]]:
    """The recurrences among a recovered journal's ``timers`` (key -> row), by name."""
    next_due: dict[str, float] = {}
    last: dict[str, tuple[float, str]] = {}
    for row in timers.values():
        found = occurrence_of(row.key)
        if found is None or user_handler(row.handler) is None:
            continue
        name, nominal = found
        if row.state in (TimerState.PENDING, TimerState.RUNNING):
            next_due[name] = min(row.due, next_due.get(name, row.due))
        elif nominal >= last.get(name, (float("-inf"), ""))[0]:
            last[name] = (nominal, row.state.value)
    out = []
    for row in timers.values():
        if row.handler != RULE_HANDLER or row.state is not TimerState.PENDING:
            continue
        name = row.key.rpartition("@")[0]
        fields = decode_payload(row.payload)
        out.append(
            {
                "name": name,
                "version": row.version,
                "handler": fields["handler"],
                "cron": fields["cron"],
                "every": fields["every"],
                "tz": fields["tz"],
                "catch_up": fields["catch_up"],
                "overlap": fields["overlap"],
                "next_due": next_due.get(name),
                "last_outcome": last.get(name, (0.0, None))[1],
            }
        )
    return sorted(out, key=lambda item: str(item["name"]))


async def cmd_recurring(args: argparse.Namespace, out: Output) -> int:
    async with open_readonly(args.db) as journal:
        recovered = await journal.recover()
    rows = recurrence_rows(recovered.timers)
    if out.json_mode:
        out.json({"recurrences": rows})
        return EXIT_OK
    if not rows:
        out.line("no recurrences")
        return EXIT_OK
    out.table(
        ["name", "rule", "tz", "next due (UTC)", "last outcome"],
        [
            [
                r["name"],
                f"cron {r['cron']}" if r["cron"] is not None else f"every {r['every']:g}s",
                r["tz"],
                fmt_time(r["next_due"]) if r["next_due"] is not None else "-",
                r["last_outcome"] or "-",
            ]
            for r in rows
        ],
    )
    return EXIT_OK
