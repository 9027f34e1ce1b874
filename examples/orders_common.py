"""The order service's logic, shared by its two web front ends (``order_service.py`` on aiohttp,
``fastapi_orders.py`` on FastAPI): the orders table, the expiry timer, and what each request does.

Not run on its own. Each function answers ``(http_status, json_body)`` so that a front end only
parses the request and sends the answer.

- Creating an order records it UNPAID, then schedules the timer ``order:<id>`` at its payment
  deadline; the answer carries the timer's version.
- The timer's handler cancels the order with a conditional update (``... WHERE status =
  'UNPAID'``): firing twice (after a crash) or after a payment changes nothing. That is what
  makes at-least-once delivery safe.
- Paying runs the same kind of conditional update to PAID, *then* cancels the timer. The orders
  table decides the pay/timeout race: if the timeout won, the payment is refused and refunded
  (409), whatever the timer call says.
- Only the order's owner may stop the automatic cancellation, and only by naming the timer's
  version: a stale request never cancels a newer schedule of the same key. The answer says
  whether the timer was cancelled, or its handler was already running and only asked to stop.

The orders table is plain SQLite through the standard library: each statement is short and
local, so it runs on the event loop. With a networked database, use its asyncio driver.
"""

from __future__ import annotations

import argparse
import json
import logging
import sqlite3
import time
import uuid
from typing import Any

from wheel_engine import CancelResult, Engine, Firing

logger = logging.getLogger("order_service")

EXPIRE = "orders.expire"
SWEEP = "orders.sweep"
#: The sweep runs every SWEEP_EVERY seconds and cancels orders GRACE seconds past their deadline.
SWEEP_EVERY = 300.0
GRACE = 60.0
Answer = tuple[int, dict[str, Any]]

SCHEMA = """
CREATE TABLE IF NOT EXISTS orders (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    amount REAL NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('UNPAID', 'PAID', 'CANCELLED')),
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    timer_version INTEGER,
    paid_at REAL,
    cancelled_at REAL,
    refunded_at REAL
)
"""

CANCEL_ANSWERS: dict[CancelResult, tuple[int, str]] = {
    CancelResult.CANCELED: (200, "cancelled: the order will not expire"),
    CancelResult.CANCEL_REQUESTED: (
        202,
        "the expiry was already running; it was asked to stop: GET the order to see how it ended",
    ),
    CancelResult.ALREADY_DONE: (409, "too late: the timer has already run"),
    CancelResult.NOT_FOUND: (409, "no live timer with that version (stale request?)"),
}


class Orders:
    """The orders table. Every state change is one conditional UPDATE: the database decides."""

    def __init__(self, path: str) -> None:
        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.row_factory = sqlite3.Row
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute(SCHEMA)

    def close(self) -> None:
        self.db.close()

    def get(self, order_id: str) -> dict[str, Any] | None:
        row = self.db.execute("SELECT * FROM orders WHERE id = ?", (order_id,)).fetchone()
        return None if row is None else dict(row)

    def create(self, owner: str, amount: float, now: float, timeout: float) -> str:
        order_id = uuid.uuid4().hex[:12]
        self.db.execute(
            "INSERT INTO orders (id, owner, amount, status, created_at, expires_at) "
            "VALUES (?, ?, ?, 'UNPAID', ?, ?)",
            (order_id, owner, amount, now, now + timeout),
        )
        return order_id

    def set_timer_version(self, order_id: str, version: int) -> None:
        self.db.execute("UPDATE orders SET timer_version = ? WHERE id = ?", (version, order_id))

    def expire(self, order_id: str, now: float) -> bool:
        """UNPAID -> CANCELLED. False if it was paid (or cancelled) already: nothing to do."""
        cur = self.db.execute(
            "UPDATE orders SET status = 'CANCELLED', cancelled_at = ? "
            "WHERE id = ? AND status = 'UNPAID'",
            (now, order_id),
        )
        return cur.rowcount == 1

    def sweep(self, now: float, grace: float) -> int:
        """Cancel every UNPAID order more than ``grace`` seconds past its deadline: what a lost
        timer would have left open. One conditional UPDATE; returns how many it cancelled."""
        cur = self.db.execute(
            "UPDATE orders SET status = 'CANCELLED', cancelled_at = ? "
            "WHERE status = 'UNPAID' AND expires_at < ?",
            (now, now - grace),
        )
        return cur.rowcount

    def pay(self, order_id: str, now: float) -> bool:
        """UNPAID -> PAID. False if the timeout got there first."""
        cur = self.db.execute(
            "UPDATE orders SET status = 'PAID', paid_at = ? WHERE id = ? AND status = 'UNPAID'",
            (now, order_id),
        )
        return cur.rowcount == 1

    def refund(self, order_id: str, now: float) -> None:
        self.db.execute(
            "UPDATE orders SET refunded_at = coalesce(refunded_at, ?) WHERE id = ?",
            (now, order_id),
        )


def parse_args(doc: str | None, argv: list[str] | None) -> argparse.Namespace:
    """The web front ends' command line (and their logging set up)."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0] if doc else None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080, help="0: any free port")
    parser.add_argument("--db", default="orders.db", help="the orders database")
    parser.add_argument("--journal", default="order-timers.db", help="the timer journal")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds to pay")
    parser.add_argument("--grace", type=float, default=10.0, help="shutdown grace, seconds")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    return args


def timer_key(order_id: str) -> str:
    return f"order:{order_id}"


def register_handlers(engine: Engine, orders: Orders) -> None:
    @engine.handler(EXPIRE, timeout=10.0)
    async def expire(firing: Firing) -> None:
        # Idempotent: the WHERE makes a second firing (or one after payment) a no-op.
        order_id = firing.payload["order"]
        if orders.expire(order_id, time.time()):
            logger.info("order %s expired unpaid: cancelled", order_id)

    @engine.handler(SWEEP, timeout=60.0)
    async def sweep(firing: Firing) -> None:
        # The backstop: the database is the truth, the timers the fast path.
        cancelled = orders.sweep(time.time(), GRACE)
        if cancelled:
            logger.warning("sweep cancelled %d overdue unpaid orders", cancelled)
        await schedule_missing(engine, orders)


async def start_sweep(engine: Engine) -> None:
    """The sweep every 5 minutes, as a recurrence: one node runs each occurrence, durably.
    Scheduled only if the journal has none yet: scheduling it again would restart its grid, and
    a service restarted more often than every 5 minutes would then never sweep."""
    if not any(r.name == "orders-sweep" for r in await engine.recurrences()):
        await engine.schedule_recurring("orders-sweep", SWEEP, every=SWEEP_EVERY)


async def schedule_missing(engine: Engine, orders: Orders) -> int:
    """At start: give every UNPAID order without a timer its timer back (crash between steps)."""
    missing = 0
    rows = orders.db.execute("SELECT id, expires_at FROM orders WHERE status = 'UNPAID'")
    for row in rows.fetchall():
        if engine.get(timer_key(row["id"])) is None:
            info = await engine.schedule(
                EXPIRE,
                at=max(row["expires_at"], time.time()),
                payload={"order": row["id"]},
                key=timer_key(row["id"]),
                on_conflict="keep",
            )
            orders.set_timer_version(row["id"], info.version)
            missing += 1
    if missing:
        logger.warning("scheduled %d missing order timers", missing)
    return missing


async def create_order(
    engine: Engine, orders: Orders, owner: str | None, body: bytes, timeout: float
) -> Answer:
    """``owner``: the ``X-User`` header; ``body``: the raw request body, like {"amount": 42}."""
    if not owner:
        return 401, {"error": "X-User header required"}
    try:
        amount = float(json.loads(body)["amount"])
    except (ValueError, KeyError, TypeError):
        return 400, {"error": 'body must be JSON like {"amount": 42}'}
    now = time.time()
    order_id = orders.create(owner, amount, now, timeout)
    # The row first, then the timer. If the process dies in between, the order is UNPAID with no
    # timer: ``schedule_missing`` finds those at the next start.
    info = await engine.schedule(
        EXPIRE, delay=timeout, payload={"order": order_id}, key=timer_key(order_id)
    )
    orders.set_timer_version(order_id, info.version)
    body = {
        "id": order_id,
        "status": "UNPAID",
        "expires_at": info.due,
        "timer_version": info.version,
    }
    return 202, body


async def pay_order(engine: Engine, orders: Orders, order_id: str) -> Answer:
    if orders.get(order_id) is None:
        return 404, {"error": "no such order"}
    now = time.time()
    if orders.pay(order_id, now):
        result = await engine.cancel(timer_key(order_id))
        # CANCELED: it will never fire. CANCEL_REQUESTED: it was firing right now; its
        # conditional update finds the order PAID and does nothing. Either way: paid.
        return 200, {"id": order_id, "status": "PAID", "timer": result.value}
    order = orders.get(order_id)
    assert order is not None
    if order["status"] == "PAID":
        return 200, {"id": order_id, "status": "PAID", "note": "already paid"}
    orders.refund(order_id, now)
    return 409, {
        "id": order_id,
        "status": order["status"],
        "error": "the order timed out before the payment arrived; the payment is refunded",
        "refunded": True,
    }


async def cancel_timer(
    engine: Engine, orders: Orders, order_id: str, user: str | None, version: str | None
) -> Answer:
    order = orders.get(order_id)
    if order is None:
        return 404, {"error": "no such order"}
    if user != order["owner"]:
        return 403, {"error": "only the order's owner may do that"}
    try:
        live_version = int(version or "")
    except ValueError:
        return 400, {"error": "?version=N required (the timer_version you were given)"}
    result = await engine.cancel(timer_key(order_id), version=live_version)
    status, message = CANCEL_ANSWERS[result]
    return status, {"id": order_id, "result": result.value, "message": message}


def order_view(engine: Engine, orders: Orders, order_id: str) -> Answer:
    order = orders.get(order_id)
    if order is None:
        return 404, {"error": "no such order"}
    timer = engine.get(timer_key(order_id))
    view = {k: v for k, v in order.items() if k != "owner"}
    view["timer"] = (
        None
        if timer is None
        else {"state": timer.state.value, "version": timer.version, "due": timer.due}
    )
    return 200, view
