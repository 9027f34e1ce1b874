"""The order-timeout demo: orders that cancel themselves, and a crash in the middle.

``wheel-engine demo`` (or ``make demo``) tells the whole story in under a minute:

1. A plan of a few thousand orders is written to an SQLite *orders* database, separate from the
   timer journal. Each order gets a payment timeout of a few seconds. Some customers pay early,
   some at the last instant before the timeout, some just after it, some never.
2. A worker process runs an :class:`~wheel_engine.Engine` on its own journal. Creating an order
   schedules a timer ``order:<id>`` at the order's deadline. Paying runs
   ``UPDATE orders SET status='PAID' ... WHERE status='UNPAID'`` and then cancels the timer.
   The timer's handler runs ``UPDATE orders SET status='CANCELLED' ... WHERE status='UNPAID'``:
   whichever of the two commits first wins, the other changes nothing. That conditional update
   is what makes the handler idempotent and the pay/timeout race safe.
3. Partway through, the demo kills the worker with ``SIGKILL`` (no cleanup, no flush) and starts
   a new one on the same journal: it recovers every timer, fires the overdue ones at once, and
   re-fires the ones whose handler was interrupted; those second firings change nothing.
4. At the end it checks every order and prints lateness, throughput and how many timers fired
   twice. It exits non-zero if any check fails.

The worker is this module run as ``python -m wheel_engine.demo --worker DIR``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import math
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

    from wheel_engine import Engine, Firing

__all__ = ["Plan", "check", "main", "run"]

logger = logging.getLogger(__name__)

HANDLER = "orders.timeout"
ORDERS_DB = "orders.db"
JOURNAL_DB = "timers.db"

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value);
CREATE TABLE IF NOT EXISTS plan (
    id TEXT PRIMARY KEY,
    create_offset REAL NOT NULL,   -- seconds after t0
    timeout REAL NOT NULL,         -- seconds from creation to the payment deadline
    pay_offset REAL,               -- seconds after creation the customer pays; NULL: never
    kind TEXT NOT NULL             -- never | early | last-instant | late
);
CREATE TABLE IF NOT EXISTS orders (
    id TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    due REAL NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('UNPAID', 'PAID', 'CANCELLED')),
    paid_at REAL,
    cancelled_at REAL,
    schedule_seconds REAL          -- how long engine.schedule took (the journal commit)
);
CREATE TABLE IF NOT EXISTS payments (
    order_id TEXT PRIMARY KEY,
    at REAL NOT NULL,
    accepted INTEGER NOT NULL,     -- 0: the timeout had won; the payment is refunded
    cancel_result TEXT             -- what engine.cancel said; NULL: not called yet
);
CREATE TABLE IF NOT EXISTS firings (
    n INTEGER PRIMARY KEY,
    order_id TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    due REAL NOT NULL,
    fired_at REAL NOT NULL,
    applied INTEGER NOT NULL,      -- 1: this firing cancelled the order; 0: nothing to do
    worker INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS workers (
    n INTEGER PRIMARY KEY,
    pid INTEGER NOT NULL,
    started_at REAL NOT NULL,
    ready_at REAL,
    recovered INTEGER,             -- live timers found in the journal at start
    recovery_seconds REAL,
    finished_at REAL,
    killed_at REAL
);
"""


@dataclass(frozen=True, slots=True)
class Plan:
    """The demo's shape. ``quick`` shrinks every time scale for tests."""

    orders: int = 3000
    window: float = 8.0  #: orders are created over this many seconds
    timeout_min: float = 2.0
    timeout_max: float = 5.0
    kill_at: float = 5.0  #: seconds after t0 the worker is killed
    crash: bool = True
    seed: int = 0
    quick: bool = False
    #: shares of customers: pay early, pay in the last instant, pay just too late (rest: never)
    shares: tuple[float, float, float] = (0.45, 0.12, 0.08)

    @classmethod
    def make(cls, orders: int, *, quick: bool, seed: int, crash: bool) -> Plan:
        if quick:
            return cls(
                orders=orders,
                window=1.5,
                timeout_min=0.4,
                timeout_max=1.0,
                kill_at=1.2,
                crash=crash,
                seed=seed,
                quick=True,
            )
        return cls(orders=orders, crash=crash, seed=seed)

    @property
    def deadline(self) -> float:
        """Seconds after t0 by which a healthy run has finished (generous)."""
        return self.window + self.timeout_max + (20.0 if not self.quick else 15.0)


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, timeout=10.0, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


@contextlib.contextmanager
def _tx(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def write_plan(workdir: Path, plan: Plan) -> None:
    """Create the orders database and the plan of orders and payments in it."""
    rng = random.Random(plan.seed)
    conn = _connect(workdir / ORDERS_DB)
    try:
        conn.executescript(SCHEMA)
        early, last, late = plan.shares
        rows = []
        for i in range(plan.orders):
            timeout = rng.uniform(plan.timeout_min, plan.timeout_max)
            draw = rng.random()
            if draw < early:
                kind, pay = "early", rng.uniform(0.1, 0.8) * timeout
            elif draw < early + last:
                kind, pay = "last-instant", timeout - rng.uniform(0.0, 0.015)
            elif draw < early + last + late:
                kind, pay = "late", timeout + rng.uniform(0.0, 0.03)
            else:
                kind, pay = "never", None
            rows.append((f"o{i:05d}", rng.uniform(0.0, plan.window), timeout, pay, kind))
        with _tx(conn):
            conn.execute("DELETE FROM plan")
            conn.executemany("INSERT INTO plan VALUES (?, ?, ?, ?, ?)", rows)
            conn.execute(
                "INSERT OR REPLACE INTO meta VALUES ('plan', ?)",
                (json.dumps({"orders": plan.orders, "seed": plan.seed, "quick": plan.quick}),),
            )
    finally:
        conn.close()


# ---------------------------------------------------------------------------------------------
# The worker: the "order service". Everything in here is what a real service would do.
# ---------------------------------------------------------------------------------------------


class Worker:
    def __init__(self, workdir: Path, number: int) -> None:
        self.workdir = workdir
        self.number = number
        self.db = _connect(workdir / ORDERS_DB)
        self.rng = random.Random(os.getpid())
        self.engine: Engine | None = None

    # --- the timer's handler: idempotent through a conditional update -------------------------
    async def on_timeout(self, firing: Firing) -> None:
        order_id = firing.payload["order"]
        now = time.time()
        with _tx(self.db):
            cur = self.db.execute(
                "UPDATE orders SET status = 'CANCELLED', cancelled_at = ? "
                "WHERE id = ? AND status = 'UNPAID'",
                (now, order_id),
            )
            self.db.execute(
                "INSERT INTO firings (order_id, idempotency_key, attempt, due, fired_at, "
                "applied, worker) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    order_id,
                    firing.idempotency_key,
                    firing.attempt,
                    firing.due,
                    now,
                    cur.rowcount,
                    self.number,
                ),
            )
        # "Tell the customer": a downstream call, keyed by firing.idempotency_key so that a
        # repeat after a crash is recognised downstream. A SIGKILL in here means this firing is
        # not acknowledged, and it fires again after the restart: absorbed by the WHERE above.
        await asyncio.sleep(self.rng.uniform(0.02, 0.2))

    # --- the service's two operations ---------------------------------------------------------
    async def create_order(self, order_id: str, timeout: float) -> float:
        """Schedule the order's timer (committed), then record the order. Returns created_at."""
        assert self.engine is not None
        row = self.db.execute("SELECT created_at FROM orders WHERE id = ?", (order_id,)).fetchone()
        if row is not None:
            return float(row[0])
        started = time.time()
        # on_conflict="keep": if a crash hit between these two steps, the retried request
        # finds the timer already scheduled and keeps it (and its deadline).
        info = await self.engine.schedule(
            HANDLER,
            at=started + timeout,
            payload={"order": order_id},
            key=f"order:{order_id}",
            on_conflict="keep",
        )
        took = time.time() - started
        created_at = info.due - timeout
        with _tx(self.db):
            self.db.execute(
                "INSERT OR IGNORE INTO orders (id, created_at, due, status, schedule_seconds) "
                "VALUES (?, ?, ?, 'UNPAID', ?)",
                (order_id, created_at, info.due, took),
            )
        return created_at

    async def pay(self, order_id: str) -> None:
        """The customer pays: the order row decides the race, then the timer is cancelled."""
        assert self.engine is not None
        now = time.time()
        with _tx(self.db):
            cur = self.db.execute(
                "UPDATE orders SET status = 'PAID', paid_at = ? WHERE id = ? AND status = 'UNPAID'",
                (now, order_id),
            )
            accepted = cur.rowcount == 1
            self.db.execute(
                "INSERT OR IGNORE INTO payments (order_id, at, accepted) VALUES (?, ?, ?)",
                (order_id, now, int(accepted)),
            )
        if accepted:
            await self.cancel_timer(order_id)
        # else: the timeout won the race: the order is cancelled and the payment is refunded.

    async def cancel_timer(self, order_id: str) -> None:
        assert self.engine is not None
        result = await self.engine.cancel(f"order:{order_id}")
        with _tx(self.db):
            self.db.execute(
                "UPDATE payments SET cancel_result = ? WHERE order_id = ?",
                (result.value, order_id),
            )

    # --- driving the plan -------------------------------------------------------------------
    async def customer(
        self, t0: float, order_id: str, create_offset: float, timeout: float, pay: float | None
    ) -> None:
        await _sleep_until(t0 + create_offset)
        created_at = await self.create_order(order_id, timeout)
        if pay is None:
            return
        await _sleep_until(created_at + pay)
        await self.pay(order_id)

    async def serve(self) -> int:
        from wheel_engine import Engine, JournalLocked

        started = time.time()
        with _tx(self.db):
            self.db.execute(
                "INSERT OR REPLACE INTO workers (n, pid, started_at) VALUES (?, ?, ?)",
                (self.number, os.getpid(), started),
            )
        engine = Engine(str(self.workdir / JOURNAL_DB), max_concurrency=256)
        engine.register(HANDLER, self.on_timeout)
        self.engine = engine
        for _ in range(200):  # the killed worker's lock goes with its process; allow a moment
            try:
                await engine.start()
                break
            except JournalLocked:
                await asyncio.sleep(0.025)
        else:
            await engine.start()
        ready = time.time()
        stats = engine.stats()
        recovered = int(stats.get("pending", 0)) + int(stats.get("running", 0))
        logger.info("worker %d ready: %d live timers recovered", self.number, recovered)
        with _tx(self.db):
            self.db.execute(
                "UPDATE workers SET ready_at = ?, recovered = ?, recovery_seconds = ? WHERE n = ?",
                (ready, recovered, ready - started, self.number),
            )
            self.db.execute("INSERT OR IGNORE INTO meta VALUES ('t0', ?)", (ready + 0.2,))
        t0 = float(self.db.execute("SELECT value FROM meta WHERE name = 't0'").fetchone()[0])
        try:
            # Payments accepted before the crash whose timer was not cancelled yet (the outbox).
            pending_cancels = self.db.execute(
                "SELECT order_id FROM payments WHERE accepted = 1 AND cancel_result IS NULL"
            ).fetchall()
            for (order_id,) in pending_cancels:
                await self.cancel_timer(order_id)
            tasks = []
            plan = self.db.execute(
                "SELECT p.id, p.create_offset, p.timeout, p.pay_offset FROM plan p "
                "LEFT JOIN payments y ON y.order_id = p.id "
                "WHERE y.order_id IS NULL ORDER BY p.create_offset"
            ).fetchall()
            for order_id, create_offset, timeout, pay in plan:
                tasks.append(
                    asyncio.create_task(self.customer(t0, order_id, create_offset, timeout, pay))
                )
            await asyncio.gather(*tasks)
            # Wait for every order to be settled and every timer to be done.
            while True:
                unpaid = self.db.execute(
                    "SELECT count(*) FROM orders WHERE status = 'UNPAID'"
                ).fetchone()[0]
                stats = engine.stats()
                if unpaid == 0 and stats.get("pending", 0) == 0 and stats.get("running", 0) == 0:
                    break
                await asyncio.sleep(0.02)
        finally:
            await engine.close(grace=5.0)
        with _tx(self.db):
            self.db.execute(
                "UPDATE workers SET finished_at = ? WHERE n = ?", (time.time(), self.number)
            )
        return 0


async def _sleep_until(when: float) -> None:
    delay = when - time.time()
    if delay > 0:
        await asyncio.sleep(delay)


def _worker_main(workdir: Path, number: int) -> int:
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    worker = Worker(workdir, number)
    try:
        return asyncio.run(worker.serve())
    finally:
        worker.db.close()


# ---------------------------------------------------------------------------------------------
# The parent: runs the worker, kills it, restarts it, shows progress, checks the outcome.
# ---------------------------------------------------------------------------------------------


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))
    return ordered[index]


@dataclass
class Outcome:
    figures: dict[str, Any] = field(default_factory=dict)
    checks: list[tuple[str, bool, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(passed for _, passed, _ in self.checks)


def check(workdir: Path, plan: Plan, *, worker_codes: list[int], killed: bool) -> Outcome:
    """Read the orders database and judge the run."""
    conn = _connect(workdir / ORDERS_DB)
    try:
        q = conn.execute
        out = Outcome()
        n_orders = q("SELECT count(*) FROM orders").fetchone()[0]
        status = dict(q("SELECT status, count(*) FROM orders GROUP BY status").fetchall())
        accepted = q("SELECT count(*) FROM payments WHERE accepted = 1").fetchone()[0]
        refused = q("SELECT count(*) FROM payments WHERE accepted = 0").fetchone()[0]
        unpaid_not_cancelled = q(
            "SELECT count(*) FROM orders o LEFT JOIN payments p "
            "ON p.order_id = o.id AND p.accepted = 1 "
            "WHERE p.order_id IS NULL AND o.status != 'CANCELLED'"
        ).fetchone()[0]
        paid_cancelled = q(
            "SELECT count(*) FROM orders o JOIN payments p ON p.order_id = o.id "
            "WHERE p.accepted = 1 AND o.status != 'PAID'"
        ).fetchone()[0]
        cancelled_early = q(
            "SELECT count(*) FROM orders WHERE status = 'CANCELLED' AND cancelled_at < due"
        ).fetchone()[0]
        fired_early = q("SELECT count(*) FROM firings WHERE fired_at < due").fetchone()[0]
        applied = dict(
            q(
                "SELECT o.status, count(*) FROM orders o JOIN "
                "(SELECT order_id, sum(applied) AS a FROM firings GROUP BY order_id) f "
                "ON f.order_id = o.id WHERE f.a = 1 GROUP BY o.status"
            ).fetchall()
        )
        applied_twice = q(
            "SELECT count(*) FROM (SELECT order_id FROM firings GROUP BY order_id "
            "HAVING sum(applied) > 1)"
        ).fetchone()[0]
        fired_twice = q(
            "SELECT count(*) FROM (SELECT idempotency_key FROM firings "
            "GROUP BY idempotency_key HAVING count(*) > 1)"
        ).fetchone()[0]
        fired_after_paid = q(
            "SELECT count(DISTINCT f.order_id) FROM firings f JOIN orders o "
            "ON o.id = f.order_id WHERE o.status = 'PAID'"
        ).fetchone()[0]
        cancel_results = dict(
            q(
                "SELECT coalesce(cancel_result, 'not called'), count(*) FROM payments "
                "WHERE accepted = 1 GROUP BY 1"
            ).fetchall()
        )
        kinds = dict(
            q(
                "SELECT p.kind || ':' || o.status, count(*) FROM plan p JOIN orders o "
                "ON o.id = p.id GROUP BY 1"
            ).fetchall()
        )
        workers = q(
            "SELECT n, pid, started_at, ready_at, recovered, recovery_seconds, finished_at, "
            "killed_at FROM workers ORDER BY n"
        ).fetchall()
        firing_rows = q(
            "SELECT f.due, f.fired_at, f.worker FROM firings f "
            "JOIN (SELECT idempotency_key, min(n) AS n FROM firings GROUP BY idempotency_key) "
            "firsts ON firsts.n = f.n"
        ).fetchall()
        sched = [
            float(r[0])
            for r in q(
                "SELECT schedule_seconds FROM orders WHERE schedule_seconds IS NOT NULL"
            ).fetchall()
        ]
        span = q("SELECT min(created_at), max(created_at) FROM orders").fetchone()
        fire_span = q("SELECT min(fired_at), max(fired_at) FROM firings").fetchone()
        t0 = q("SELECT value FROM meta WHERE name = 't0'").fetchone()
    finally:
        conn.close()

    # Lateness: the first firing of each timer. Timers that came due while no worker was ready
    # (killed, or restarting) fired late by the outage: they are counted apart.
    ready_at = {int(w[0]): w[3] for w in workers}
    outage: tuple[float, float] | None = None
    if len(workers) >= 2 and workers[0][7] is not None and workers[1][3] is not None:
        outage = (float(workers[0][7]), float(workers[1][3]))
    normal: list[float] = []
    after_outage: list[float] = []
    for due, fired_at, worker in firing_rows:
        late = float(fired_at) - float(due)
        ready = ready_at.get(int(worker))
        if int(worker) > 1 and ready is not None and due < ready:
            after_outage.append(late)
        else:
            normal.append(late)
    per_second: dict[int, int] = {}
    for _due, fired_at, _worker in firing_rows:
        per_second[int(fired_at)] = per_second.get(int(fired_at), 0) + 1
    created_rate = (
        n_orders / (span[1] - span[0]) if span[0] is not None and span[1] > span[0] else math.nan
    )
    out.figures = {
        "orders": n_orders,
        "paid": status.get("PAID", 0),
        "cancelled": status.get("CANCELLED", 0),
        "unpaid": status.get("UNPAID", 0),
        "payments_accepted": accepted,
        "payments_refused_timeout_won": refused,
        "cancel_results": cancel_results,
        "by_customer_kind": kinds,
        "timers_fired": len(firing_rows),
        "fired_twice_absorbed": fired_twice,
        "fired_on_paid_order_absorbed": fired_after_paid,
        "lateness_p50_ms": _percentile(normal, 0.50) * 1000,
        "lateness_p99_ms": _percentile(normal, 0.99) * 1000,
        "lateness_max_ms": max(normal, default=math.nan) * 1000,
        "due_during_outage": len(after_outage),
        "outage_lateness_max_ms": max(after_outage, default=math.nan) * 1000,
        "outage_seconds": (outage[1] - outage[0]) if outage else None,
        "schedule_commit_p50_ms": _percentile(sched, 0.50) * 1000,
        "schedule_commit_p99_ms": _percentile(sched, 0.99) * 1000,
        "orders_created_per_second": created_rate,
        "peak_firings_per_second": max(per_second.values(), default=0),
        "firing_span_seconds": (fire_span[1] - fire_span[0]) if fire_span[0] is not None else None,
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
        "t0": float(t0[0]) if t0 else None,
    }
    out.checks = [
        ("every order was created", n_orders == plan.orders, f"{n_orders}/{plan.orders}"),
        (
            "every unpaid order was cancelled",
            unpaid_not_cancelled == 0,
            f"{unpaid_not_cancelled} unpaid and not cancelled",
        ),
        (
            "no paid order was cancelled",
            paid_cancelled == 0,
            f"{paid_cancelled} paid orders not PAID",
        ),
        (
            "each cancellation applied exactly once",
            applied_twice == 0
            and applied.get("CANCELLED", 0) == status.get("CANCELLED", 0)
            and applied.get("PAID", 0) == 0,
            f"{applied.get('CANCELLED', 0)} applied for {status.get('CANCELLED', 0)} cancelled, "
            f"{applied_twice} twice",
        ),
        (
            "no timer fired before its due time",
            fired_early == 0 and cancelled_early == 0,
            f"{fired_early} early firings, {cancelled_early} early cancellations",
        ),
        (
            "every worker exited cleanly" if not killed else "the restarted worker finished",
            bool(worker_codes) and worker_codes[-1] == 0,
            f"exit codes {worker_codes}",
        ),
    ]
    if killed:
        recovered = workers[-1][4] if len(workers) >= 2 else None
        out.checks.append(
            (
                "the worker was killed (SIGKILL) and its successor recovered the timers",
                len(workers) >= 2 and (recovered or 0) > 0,
                f"{recovered} live timers recovered",
            )
        )
    return out


def _counts(workdir: Path) -> dict[str, int]:
    conn = sqlite3.connect(workdir / ORDERS_DB, timeout=5.0)
    try:
        status = dict(conn.execute("SELECT status, count(*) FROM orders GROUP BY status"))
        firings = conn.execute("SELECT count(*) FROM firings").fetchone()[0]
        payments = conn.execute("SELECT count(*) FROM payments").fetchone()[0]
    finally:
        conn.close()
    return {
        "created": sum(status.values()),
        "unpaid": status.get("UNPAID", 0),
        "paid": status.get("PAID", 0),
        "cancelled": status.get("CANCELLED", 0),
        "firings": firings,
        "payments": payments,
    }


def _t0(workdir: Path) -> float | None:
    conn = sqlite3.connect(workdir / ORDERS_DB, timeout=5.0)
    try:
        row = conn.execute("SELECT value FROM meta WHERE name = 't0'").fetchone()
    finally:
        conn.close()
    return float(row[0]) if row else None


def _mark_killed(workdir: Path, number: int, when: float) -> None:
    conn = _connect(workdir / ORDERS_DB)
    try:
        with _tx(conn):
            conn.execute("UPDATE workers SET killed_at = ? WHERE n = ?", (when, number))
    finally:
        conn.close()


def _spawn(workdir: Path, number: int) -> subprocess.Popen[bytes]:
    log = (workdir / f"worker-{number}.log").open("wb")
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "wheel_engine.demo", "--worker", str(workdir), str(number)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    finally:
        log.close()


def run(
    *,
    orders: int = 3000,
    quick: bool = False,
    seed: int | None = None,
    workdir: str | os.PathLike[str] | None = None,
    crash: bool = True,
    json_mode: bool = False,
    console: Console | None = None,
) -> int:
    """Run the demo end to end; returns the exit code (0: every check passed)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    console = console or Console()
    if orders < 1:
        console.print("[red]--orders must be at least 1[/red]")
        return 2
    seed = seed if seed is not None else random.randrange(1_000_000)
    plan = Plan.make(orders, quick=quick, seed=seed, crash=crash)
    with contextlib.ExitStack() as stack:
        if workdir is None:
            work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="wheel-demo-")))
        else:
            work = Path(workdir)
            work.mkdir(parents=True, exist_ok=True)
            for name in (ORDERS_DB, JOURNAL_DB):
                for suffix in ("", "-wal", "-shm", "-lock"):
                    with contextlib.suppress(FileNotFoundError):
                        (work / f"{name}{suffix}").unlink()
        write_plan(work, plan)
        if not json_mode:
            console.print(
                f"[bold]wheel-engine demo[/bold]: {plan.orders} orders, payment timeouts "
                f"{plan.timeout_min:g}-{plan.timeout_max:g}s, created over {plan.window:g}s "
                f"(seed {seed}); orders in {work / ORDERS_DB}, timers in {work / JOURNAL_DB}"
            )
        codes: list[int] = []
        killed = False
        started = time.time()
        progress = Progress(
            TextColumn("{task.description:<28}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[info]}"),
            console=console,
            disable=json_mode,
            transient=False,
        )

        def say(message: str) -> None:
            if not json_mode:
                progress.console.print(message)

        number = 1
        proc = _spawn(work, number)
        try:
            with progress:
                created = progress.add_task("orders created", total=plan.orders, info="")
                settled = progress.add_task("orders paid or cancelled", total=plan.orders, info="")
                fired = progress.add_task("timeouts fired", total=None, info="")
                while True:
                    code = proc.poll()
                    t0 = _t0(work)
                    now = time.time()
                    if (
                        plan.crash
                        and not killed
                        and code is None
                        and t0 is not None
                        and now >= t0 + plan.kill_at
                    ):
                        proc.send_signal(signal.SIGKILL)
                        proc.wait()
                        killed_at = time.time()
                        _mark_killed(work, number, killed_at)
                        codes.append(proc.returncode)
                        killed = True
                        counts = _counts(work)
                        say(
                            f"[yellow]SIGKILL[/yellow] worker #{number} (pid {proc.pid}) at "
                            f"t={killed_at - t0:.2f}s with {counts['unpaid']} orders unpaid; "
                            "restarting it on the same journal"
                        )
                        number += 1
                        proc = _spawn(work, number)
                        continue
                    if code is not None:
                        codes.append(code)
                        break
                    if (t0 is None and now > started + 30.0) or (
                        t0 is not None and now > t0 + plan.deadline
                    ):
                        proc.kill()
                        proc.wait()
                        codes.append(proc.returncode)
                        say("[red]the worker did not finish in time[/red]")
                        break
                    counts = _counts(work)
                    progress.update(created, completed=counts["created"])
                    progress.update(
                        settled,
                        completed=counts["paid"] + counts["cancelled"],
                        info=f"paid {counts['paid']}, cancelled {counts['cancelled']}",
                    )
                    progress.update(fired, completed=counts["firings"], info="")
                    time.sleep(0.1)
                counts = _counts(work)
                progress.update(created, completed=counts["created"])
                progress.update(
                    settled,
                    completed=counts["paid"] + counts["cancelled"],
                    info=f"paid {counts['paid']}, cancelled {counts['cancelled']}",
                )
                progress.update(fired, completed=counts["firings"], total=counts["firings"])
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        outcome = check(work, plan, worker_codes=codes, killed=killed)
        outcome.figures["seconds"] = time.time() - started
        outcome.figures["seed"] = seed
        if json_mode:
            sys.stdout.write(
                json.dumps(
                    {
                        "ok": outcome.ok,
                        "figures": _finite(outcome.figures),
                        "checks": [
                            {"check": name, "ok": passed, "detail": detail}
                            for name, passed, detail in outcome.checks
                        ],
                    },
                    default=str,
                    indent=2,
                )
                + "\n"
            )
        else:
            _report(console, outcome)
        if not outcome.ok and codes and codes[-1] != 0:
            log = work / f"worker-{number}.log"
            if log.exists() and not json_mode:
                tail = log.read_text(errors="replace").splitlines()[-15:]
                console.print(f"[red]last lines of {log}:[/red]")
                for line in tail:
                    console.print(line, markup=False, highlight=False)
        return 0 if outcome.ok else 1
    raise AssertionError("unreachable")  # pragma: no cover


def _finite(value: Any) -> Any:
    """NaN (no data) as None, so the JSON is standard."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def _report(console: Console, outcome: Outcome) -> None:
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
    table.add_row(
        "lateness",
        f"p50 {ms(f['lateness_p50_ms'])}, p99 {ms(f['lateness_p99_ms'])}, "
        f"max {ms(f['lateness_max_ms'])}",
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


def main(argv: list[str] | None = None) -> int:
    """``python -m wheel_engine.demo``: the demo, or (``--worker DIR N``) its worker process."""
    parser = argparse.ArgumentParser(prog="python -m wheel_engine.demo")
    parser.add_argument("--worker", nargs=2, metavar=("DIR", "N"), help=argparse.SUPPRESS)
    parser.add_argument("--orders", type=int, default=3000)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--dir", default=None)
    parser.add_argument("--no-crash", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.worker:
        return _worker_main(Path(args.worker[0]), int(args.worker[1]))
    return run(
        orders=args.orders,
        quick=args.quick,
        seed=args.seed,
        workdir=args.dir,
        crash=not args.no_crash,
        json_mode=args.json,
    )


if __name__ == "__main__":
    sys.exit(main())
