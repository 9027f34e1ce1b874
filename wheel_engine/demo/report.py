"""The demo's report: the outcome as a table and PASS/FAIL lines, or as one JSON document."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wheel_engine.demo.verdict import Outcome

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["print_json", "print_report", "print_worker_log"]

#: How many of a failed worker's last log lines are shown.
LOG_TAIL_LINES = 15


def print_json(outcome: Outcome) -> None:
    """The outcome on stdout as one JSON document (``--json``)."""
    document = {
        "ok": outcome.ok,
        "figures": _finite(outcome.figures),
        "checks": [
            {"check": name, "ok": passed, "detail": detail}
            for name, passed, detail in outcome.checks
        ],
    }
    sys.stdout.write(json.dumps(document, default=str, indent=2) + "\n")


def print_worker_log(console: Console, log: Path) -> None:
    """The last lines of a worker's log, when it failed."""
    if not log.exists():
        return
    tail = log.read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:]
    console.print(f"[red]last lines of {log}:[/red]")
    for line in tail:
        console.print(line, markup=False, highlight=False)


def _finite(value: Any) -> Any:
    """NaN (no data) as None, so the JSON is standard."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def print_report(console: Console, outcome: Outcome) -> None:
    """What happened, as a table, then each check as PASS or FAIL."""
    from rich.table import Table

    f = outcome.figures

    def ms(value: float) -> str:
        return "-" if value is None or math.isnan(value) else f"{value:.1f} ms"

    table = Table(show_header=False, show_edge=False, title="what happened", title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    table.add_row("orders", f"{f['orders']}: {f['paid']} paid, {f['cancelled']} cancelled")
    table.add_row(
        "payments",
        f"{f['payments_accepted']} accepted; {f['payments_refused_timeout_won']} refused and "
        "refunded (the timeout had won)",
    )
    table.add_row(
        "cancel() on payment", ", ".join(f"{k} {v}" for k, v in f["cancel_results"].items())
    )
    table.add_row("timers fired", f"{f['timers_fired']} (each counted once)")
    table.add_row(
        "fired twice (crash)",
        f"{f['fired_twice_absorbed']}, absorbed by the conditional update",
    )
    table.add_row(
        "fired on a paid order",
        f"{f['fired_on_paid_order_absorbed']}, absorbed (lost the race, changed nothing)",
    )
    if f["timers_deleted_on_purpose"]:
        late = f["swept_late_max_s"]
        others = f["swept"] - f["timers_deleted_on_purpose"]
        table.add_row(
            "sweep",
            f"{f['sweep_runs']} runs (a recurring timer); it cancelled the "
            f"{f['timers_deleted_on_purpose']} orders whose timer was deleted on purpose, at "
            f"most {late:.1f}s past their deadline (the grace, then the next run)"
            + (f", and {others} more whose timer was late past the grace" if others else ""),
        )
    quick = " (--quick: short timeouts, few timers: an illustration, not a benchmark)"
    table.add_row(
        "lateness",
        f"fired minus due (wall clock) of the {f['lateness_timers']} timers a running worker "
        f"fired: p50 {ms(f['lateness_p50_ms'])}, p99 {ms(f['lateness_p99_ms'])}, "
        f"max {ms(f['lateness_max_ms'])}" + (quick if f.get("quick") else ""),
    )
    if f["outage_seconds"] is not None:
        table.add_row(
            "outage",
            f"{f['outage_seconds']:.2f}s from SIGKILL to the new worker being ready; "
            f"{f['due_during_outage']} timers due before it was ready fired at once "
            f"(max {ms(f['outage_lateness_max_ms'])} late; not in the lateness above)",
        )
    table.add_row(
        "throughput",
        f"{f['orders_created_per_second']:.0f} orders/s created (each a committed schedule: "
        f"p50 {ms(f['schedule_commit_p50_ms'])}, p99 {ms(f['schedule_commit_p99_ms'])}), "
        f"{f['peak_firings_per_second']} timers fired/s at peak",
    )
    for w in f["workers"]:
        fate = "killed with SIGKILL" if w["killed"] else ("finished" if w["finished"] else "?")
        rec = w["recovery_seconds"]
        table.add_row(
            f"worker #{w['n']}",
            f"pid {w['pid']}, recovered {w['recovered_timers']} live timers"
            + (f" in {rec * 1000:.0f} ms" if rec is not None else "")
            + f", {fate}",
        )
    table.add_row("took", f"{f['seconds']:.1f}s")
    console.print()
    console.print(table)
    console.print()
    for name, passed, detail in outcome.checks:
        mark = "[green]PASS[/green]" if passed else "[red]FAIL[/red]"
        console.print(f"{mark} {name} [dim]({detail})[/dim]")
    console.print()
    if outcome.ok:
        console.print("[bold green]all checks passed[/bold green]")
    else:
        console.print("[bold red]some checks failed[/bold red]")
