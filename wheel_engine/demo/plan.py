"""The demo's plan: its shape (:class:`Plan`), the orders database, and the orders to create.

The orders database is the demo's "business" database, separate from the timer journal: the
plan of orders and payments, the orders as the worker creates and settles them, every firing
of a timeout, every run of the sweep, and each worker's start, recovery and end. The verdict
is read from it alone.
"""

from __future__ import annotations

import contextlib
import json
import random
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "HANDLER",
    "JOURNAL_DB",
    "ORDERS_DB",
    "SWEEP_HANDLER",
    "SWEEP_NAME",
    "Plan",
    "connect",
    "transaction",
    "write_plan",
]

#: The timeout handler's name, as the timers in the journal name it.
HANDLER = "orders.timeout"
#: The sweep's handler, and the name of the recurrence that runs it (one per journal).
SWEEP_HANDLER = "orders.sweep"
SWEEP_NAME = "orders-sweep"
#: The orders database's file name in the demo's directory.
ORDERS_DB = "orders.db"
#: The timer journal's file name in the demo's directory.
JOURNAL_DB = "timers.db"

#: The orders database's tables; each column says what it records.
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value);
CREATE TABLE IF NOT EXISTS plan (
    id TEXT PRIMARY KEY,
    create_offset REAL NOT NULL,   -- seconds after t0
    timeout REAL NOT NULL,         -- seconds from creation to the payment deadline
    pay_offset REAL,               -- seconds after creation the customer pays; NULL: never
    kind TEXT NOT NULL             -- never | early | last-instant | late | timer-lost
);
CREATE TABLE IF NOT EXISTS orders (
    id TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    due REAL NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('UNPAID', 'PAID', 'CANCELLED')),
    paid_at REAL,
    cancelled_at REAL,
    cancelled_by TEXT,             -- timer | sweep: whose conditional update cancelled it
    timer_deleted_at REAL,         -- timer-lost: when the service deleted its timer on purpose
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
CREATE TABLE IF NOT EXISTS sweeps (
    n INTEGER PRIMARY KEY,
    idempotency_key TEXT NOT NULL,
    at REAL NOT NULL,
    cancelled INTEGER NOT NULL,    -- orders this run of the sweep cancelled
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
    #: "never" customers of the plan's first half whose timer the service deletes on purpose
    #: (a timer lost upstream), for the sweep to catch
    lost: int = 3
    sweep_every: float = 1.0  #: seconds between two runs of the sweep
    #: the sweep cancels UNPAID orders this many seconds past their deadline: more than a
    #: timer's lateness through the crash, so it only catches what no timer will
    grace: float = 2.0

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
                sweep_every=0.25,
                grace=1.0,
            )
        return cls(orders=orders, crash=crash, seed=seed)

    @property
    def deadline(self) -> float:
        """Seconds after t0 by which a healthy run has finished (generous)."""
        return self.window + self.timeout_max + (20.0 if not self.quick else 15.0)


def connect(path: Path) -> sqlite3.Connection:
    """The orders database in autocommit mode: every write is an explicit :func:`transaction`."""
    conn = sqlite3.connect(path, timeout=10.0, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


@contextlib.contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """``BEGIN IMMEDIATE`` ... ``COMMIT``, rolled back on any exception."""
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
    conn = connect(workdir / ORDERS_DB)
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
        never = sorted(
            (offset, order) for order, offset, _, _, kind in rows
            if kind == "never" and offset < plan.window / 2
        )  # fmt: skip
        lost = {order for _, order in never[: plan.lost]}
        rows = [(o, at, t, pay, "timer-lost" if o in lost else k) for o, at, t, pay, k in rows]
        with transaction(conn):
            conn.execute("DELETE FROM plan")
            conn.executemany("INSERT INTO plan VALUES (?, ?, ?, ?, ?)", rows)
            shape = {
                "orders": plan.orders,
                "seed": plan.seed,
                "quick": plan.quick,
                "sweep_every": plan.sweep_every,
                "grace": plan.grace,
            }
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('plan', ?)", (json.dumps(shape),))
    finally:
        conn.close()
