"""The demo's verdict: read the orders database after a run, and judge it.

The checks are the engine's guarantees as an order service sees them: every unpaid order was
cancelled (at least once), no paid order was (cancel is final, and the conditional update
absorbs the races), each cancellation applied exactly once (idempotent handler), no timer fired
before its due time (never early), every order whose timer was deleted on purpose was caught by
the sweep (the database is the truth, the timers its fast path), and the worker killed with
SIGKILL had its timers recovered by its successor. The figures (lateness, throughput,
recovery) are measured, not judged.
"""

from __future__ import annotations

import math
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wheel_engine.demo.plan import ORDERS_DB, Plan, connect
from wheel_engine.stats import percentiles

__all__ = ["Outcome", "check"]

#: One check: its name, whether it passed, and what was found.
Check = tuple[str, bool, str]

#: The counts the checks and figures are made of: name -> SQL returning one number.
_COUNTS: dict[str, str] = {
    "orders": "SELECT count(*) FROM orders",
    "accepted": "SELECT count(*) FROM payments WHERE accepted = 1",
    "refused": "SELECT count(*) FROM payments WHERE accepted = 0",
    "unpaid_not_cancelled": "SELECT count(*) FROM orders o LEFT JOIN payments p "
    "ON p.order_id = o.id AND p.accepted = 1 "
    "WHERE p.order_id IS NULL AND o.status != 'CANCELLED'",
    "paid_cancelled": "SELECT count(*) FROM orders o JOIN payments p ON p.order_id = o.id "
    "WHERE p.accepted = 1 AND o.status != 'PAID'",
    "cancelled_early": "SELECT count(*) FROM orders "
    "WHERE status = 'CANCELLED' AND cancelled_at < due",
    "fired_early": "SELECT count(*) FROM firings WHERE fired_at < due",
    "applied_twice": "SELECT count(*) FROM (SELECT order_id FROM firings GROUP BY order_id "
    "HAVING sum(applied) > 1)",
    "fired_twice": "SELECT count(*) FROM (SELECT idempotency_key FROM firings "
    "GROUP BY idempotency_key HAVING count(*) > 1)",
    "fired_after_paid": "SELECT count(DISTINCT f.order_id) FROM firings f JOIN orders o "
    "ON o.id = f.order_id WHERE o.status = 'PAID'",
    "swept": "SELECT count(*) FROM orders WHERE cancelled_by = 'sweep'",
    "timers_deleted": "SELECT count(*) FROM orders WHERE timer_deleted_at IS NOT NULL",
    "deleted_not_swept": "SELECT count(*) FROM orders "
    "WHERE timer_deleted_at IS NOT NULL AND coalesce(cancelled_by, '') != 'sweep'",
    "sweep_runs": "SELECT count(DISTINCT idempotency_key) FROM sweeps",
    "planned_lost": "SELECT count(*) FROM plan WHERE kind = 'timer-lost'",
}

#: The breakdowns: name -> SQL returning (label, count) rows.
_GROUPS: dict[str, str] = {
    "status": "SELECT status, count(*) FROM orders GROUP BY status",
    "applied": "SELECT o.status, count(*) FROM orders o JOIN "
    "(SELECT order_id, sum(applied) AS a FROM firings GROUP BY order_id) f "
    "ON f.order_id = o.id WHERE f.a = 1 GROUP BY o.status",
    "cancel_results": "SELECT coalesce(cancel_result, 'not called'), count(*) FROM payments "
    "WHERE accepted = 1 GROUP BY 1",
    "kinds": "SELECT p.kind || ':' || o.status, count(*) FROM plan p JOIN orders o "
    "ON o.id = p.id GROUP BY 1",
}

#: The rows: name -> SQL returning every row.
_ROWS: dict[str, str] = {
    "workers": "SELECT n, pid, started_at, ready_at, recovered, recovery_seconds, finished_at, "
    "killed_at FROM workers ORDER BY n",
    # the first firing of each timer (a re-fire after the crash is not lateness)
    "firsts": "SELECT f.due, f.fired_at, f.worker FROM firings f "
    "JOIN (SELECT idempotency_key, min(n) AS n FROM firings GROUP BY idempotency_key) "
    "firsts ON firsts.n = f.n",
    "schedule_seconds": "SELECT schedule_seconds FROM orders WHERE schedule_seconds IS NOT NULL",
    "created_span": "SELECT min(created_at), max(created_at) FROM orders",
    "fired_span": "SELECT min(fired_at), max(fired_at) FROM firings",
    "t0": "SELECT value FROM meta WHERE name = 't0'",
    # how long past its deadline the sweep caught each order whose timer was deleted
    "swept_late": "SELECT cancelled_at - due FROM orders "
    "WHERE cancelled_by = 'sweep' AND timer_deleted_at IS NOT NULL",
}


@dataclass
class Outcome:
    """The figures of a run and its checks; ``ok`` when every check passed."""

    figures: dict[str, Any] = field(default_factory=dict)
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(passed for _, passed, _ in self.checks)


def check(workdir: Path, plan: Plan, *, worker_codes: list[int], killed: bool) -> Outcome:
    """Read the orders database in ``workdir`` and judge the run."""
    facts = _read(workdir / ORDERS_DB)
    return Outcome(
        figures=_figures(facts),
        checks=_checks(facts, plan, worker_codes=worker_codes, killed=killed),
    )


def _read(path: Path) -> dict[str, Any]:
    conn = connect(path)
    try:
        facts: dict[str, Any] = {n: _one(conn, sql) for n, sql in _COUNTS.items()}
        facts.update({n: dict(conn.execute(sql).fetchall()) for n, sql in _GROUPS.items()})
        facts.update({n: conn.execute(sql).fetchall() for n, sql in _ROWS.items()})
    finally:
        conn.close()
    return facts


def _one(conn: sqlite3.Connection, sql: str) -> Any:
    return conn.execute(sql).fetchone()[0]


def _lateness(facts: dict[str, Any]) -> tuple[list[float], list[float]]:
    """Lateness of first firings: (normal, due while no worker was ready).

    Timers that came due while the killed worker's successor was not ready yet fired late by
    the outage; they are counted apart, so the outage does not pass for lateness.
    """
    ready_at = {int(w[0]): w[3] for w in facts["workers"]}
    normal: list[float] = []
    after_outage: list[float] = []
    for due, fired_at, worker in facts["firsts"]:
        late = float(fired_at) - float(due)
        ready = ready_at.get(int(worker))
        if int(worker) > 1 and ready is not None and due < ready:
            after_outage.append(late)
        else:
            normal.append(late)
    return normal, after_outage


def _outage_seconds(workers: list[Any]) -> float | None:
    """From the first worker's SIGKILL to its successor being ready."""
    if len(workers) >= 2 and workers[0][7] is not None and workers[1][3] is not None:
        return float(workers[1][3]) - float(workers[0][7])
    return None


def _span(row: Any) -> float | None:
    low, high = row[0]
    return None if low is None else float(high) - float(low)


def _figures(facts: dict[str, Any]) -> dict[str, Any]:
    status, workers = facts["status"], facts["workers"]
    normal, after_outage = _lateness(facts)
    sched = [float(r[0]) for r in facts["schedule_seconds"]]
    per_second: dict[int, int] = {}
    for _due, fired_at, _worker in facts["firsts"]:
        per_second[int(fired_at)] = per_second.get(int(fired_at), 0) + 1
    created_span = _span(facts["created_span"])
    t0 = facts["t0"]
    lateness_p50, lateness_p99 = percentiles(normal, (0.50, 0.99))
    schedule_p50, schedule_p99 = percentiles(sched, (0.50, 0.99))
    return {
        "orders": facts["orders"],
        "paid": status.get("PAID", 0),
        "cancelled": status.get("CANCELLED", 0),
        "unpaid": status.get("UNPAID", 0),
        "payments_accepted": facts["accepted"],
        "payments_refused_timeout_won": facts["refused"],
        "cancel_results": facts["cancel_results"],
        "by_customer_kind": facts["kinds"],
        "timers_fired": len(facts["firsts"]),
        "fired_twice_absorbed": facts["fired_twice"],
        "fired_on_paid_order_absorbed": facts["fired_after_paid"],
        "lateness_timers": len(normal),
        "lateness_p50_ms": lateness_p50 * 1000,
        "lateness_p99_ms": lateness_p99 * 1000,
        "lateness_max_ms": max(normal, default=math.nan) * 1000,
        "due_during_outage": len(after_outage),
        "outage_lateness_max_ms": max(after_outage, default=math.nan) * 1000,
        "outage_seconds": _outage_seconds(workers),
        "schedule_commit_p50_ms": schedule_p50 * 1000,
        "schedule_commit_p99_ms": schedule_p99 * 1000,
        "orders_created_per_second": (facts["orders"] / created_span if created_span else math.nan),
        "peak_firings_per_second": max(per_second.values(), default=0),
        "firing_span_seconds": _span(facts["fired_span"]),
        "sweep_runs": facts["sweep_runs"],
        "timers_deleted_on_purpose": facts["timers_deleted"],
        "swept": facts["swept"],
        "swept_late_max_s": max((float(r[0]) for r in facts["swept_late"]), default=math.nan),
        "workers": [
            {
                "n": w[0],
                "pid": w[1],
                "recovered_timers": w[4],
                "recovery_seconds": w[5],
                "killed": w[7] is not None,
                "finished": w[6] is not None,
            }
            for w in workers
        ],
        "t0": float(t0[0][0]) if t0 else None,
    }


def _checks(
    facts: dict[str, Any], plan: Plan, *, worker_codes: list[int], killed: bool
) -> list[Check]:
    status, applied = facts["status"], facts["applied"]
    n_orders, unpaid, paid_cancelled = (
        facts["orders"],
        facts["unpaid_not_cancelled"],
        facts["paid_cancelled"],
    )
    cancelled, applied_cancelled = status.get("CANCELLED", 0), applied.get("CANCELLED", 0)
    swept, deleted = facts["swept"], facts["timers_deleted"]
    checks: list[Check] = [
        ("every order was created", n_orders == plan.orders, f"{n_orders}/{plan.orders}"),
        ("every unpaid order was cancelled", unpaid == 0, f"{unpaid} unpaid and not cancelled"),
        (
            "no paid order was cancelled",
            paid_cancelled == 0,
            f"{paid_cancelled} paid orders not PAID",
        ),
        (
            "each cancellation applied exactly once",
            facts["applied_twice"] == 0
            and applied_cancelled + swept == cancelled
            and applied.get("PAID", 0) == 0,
            f"{applied_cancelled} by a timer and {swept} by the sweep for {cancelled} "
            f"cancelled, {facts['applied_twice']} twice",
        ),
        (
            "the sweep caught every order whose timer was deleted",
            facts["deleted_not_swept"] == 0 and (deleted > 0 or facts["planned_lost"] == 0),
            f"{deleted} timers deleted on purpose, {deleted - facts['deleted_not_swept']} of "
            f"their orders cancelled by the sweep in {facts['sweep_runs']} runs",
        ),
        (
            "no timer fired before its due time",
            facts["fired_early"] == 0 and facts["cancelled_early"] == 0,
            f"{facts['fired_early']} early firings, {facts['cancelled_early']} early cancellations",
        ),
        (
            "the restarted worker finished" if killed else "every worker exited cleanly",
            bool(worker_codes) and worker_codes[-1] == 0,
            f"exit codes {worker_codes}",
        ),
    ]
    if killed:
        workers = facts["workers"]
        recovered = workers[-1][4] if len(workers) >= 2 else None
        checks.append(
            (
                "the worker was killed (SIGKILL) and its successor recovered the timers",
                len(workers) >= 2 and (recovered or 0) > 0,
                f"{recovered} live timers recovered",
            )
        )
    return checks
