"""An aiohttp order service whose unpaid orders cancel themselves.

    python examples/order_service.py --port 8080 --timeout 900

    curl -s -XPOST localhost:8080/orders -H 'X-User: ann' -d '{"amount": 42}'
    curl -s -XPOST localhost:8080/orders/<id>/pay
    curl -s localhost:8080/orders/<id>
    curl -s -XDELETE 'localhost:8080/orders/<id>/timer?version=<v>' -H 'X-User: ann'

- ``POST /orders`` records an UNPAID order and schedules the timer ``order:<id>`` at its payment
  deadline; 202 with the order id and the timer's version.
- The timer's handler cancels the order with a conditional update
  (``... WHERE status = 'UNPAID'``): firing twice (after a crash) or after a payment changes
  nothing. That is what makes at-least-once delivery safe.
- ``POST /orders/{id}/pay`` runs the same kind of conditional update to PAID, *then* cancels the
  timer. The orders table decides the pay/timeout race: if the timeout won, the payment is
  refused and refunded (409), whatever the timer call says.
- ``DELETE /orders/{id}/timer?version=N`` lets the order's owner stop the automatic cancellation
  (say, a customer granted more time). The version makes a stale request harmless: it never
  cancels a newer schedule of the same key. The answer says whether the timer was cancelled, or
  its handler was already running and was only asked to stop.
- ``GET /orders/{id}`` shows the order and its timer.
- SIGTERM (or Ctrl-C) shuts down gracefully: stop accepting requests, let handlers finish (up
  to ``--grace`` seconds), flush and close the journal. Timers survive in the journal and fire
  after the next start, late ones at once.

The orders table is plain SQLite through the standard library: each statement is short and
local, so it runs on the event loop. With a networked database, use its asyncio driver.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import socket
import sqlite3
import sys
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web

from wheel_engine import CancelResult, Engine, Firing

logger = logging.getLogger("order_service")

EXPIRE = "orders.expire"

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


ENGINE = web.AppKey("engine", Engine)
ORDERS = web.AppKey("orders", Orders)
TIMEOUT = web.AppKey("timeout", float)


def timer_key(order_id: str) -> str:
    return f"order:{order_id}"


def register_handlers(engine: Engine, orders: Orders) -> None:
    @engine.handler(EXPIRE, timeout=10.0)
    async def expire(firing: Firing) -> None:
        # Idempotent: the WHERE makes a second firing (or one after payment) a no-op.
        order_id = firing.payload["order"]
        if orders.expire(order_id, time.time()):
            logger.info("order %s expired unpaid: cancelled", order_id)


def _json(data: Any, status: int = 200) -> web.Response:
    return web.json_response(data, status=status)


def _order_view(request: web.Request, order: dict[str, Any]) -> dict[str, Any]:
    timer = request.app[ENGINE].get(timer_key(order["id"]))
    view = {k: v for k, v in order.items() if k != "owner"}
    view["timer"] = (
        None
        if timer is None
        else {"state": timer.state.value, "version": timer.version, "due": timer.due}
    )
    return view


async def create_order(request: web.Request) -> web.Response:
    owner = request.headers.get("X-User")
    if not owner:
        return _json({"error": "X-User header required"}, 401)
    try:
        body = await request.json()
        amount = float(body["amount"])
    except (ValueError, KeyError, TypeError):
        return _json({"error": 'body must be JSON like {"amount": 42}'}, 400)
    orders, engine = request.app[ORDERS], request.app[ENGINE]
    now = time.time()
    order_id = orders.create(owner, amount, now, request.app[TIMEOUT])
    # The row first, then the timer. If the process dies in between, the order is UNPAID with no
    # timer: ``schedule_missing`` finds those at the next start.
    info = await engine.schedule(
        EXPIRE, delay=request.app[TIMEOUT], payload={"order": order_id}, key=timer_key(order_id)
    )
    orders.set_timer_version(order_id, info.version)
    return _json(
        {"id": order_id, "status": "UNPAID", "expires_at": info.due, "timer_version": info.version},
        202,
    )


async def pay_order(request: web.Request) -> web.Response:
    order_id = request.match_info["id"]
    orders, engine = request.app[ORDERS], request.app[ENGINE]
    if orders.get(order_id) is None:
        return _json({"error": "no such order"}, 404)
    now = time.time()
    if orders.pay(order_id, now):
        result = await engine.cancel(timer_key(order_id))
        # CANCELED: it will never fire. CANCEL_REQUESTED: it was firing right now; its
        # conditional update finds the order PAID and does nothing. Either way: paid.
        return _json({"id": order_id, "status": "PAID", "timer": result.value})
    order = orders.get(order_id)
    assert order is not None
    if order["status"] == "PAID":
        return _json({"id": order_id, "status": "PAID", "note": "already paid"})
    orders.refund(order_id, now)
    return _json(
        {
            "id": order_id,
            "status": order["status"],
            "error": "the order timed out before the payment arrived; the payment is refunded",
            "refunded": True,
        },
        409,
    )


async def cancel_timer(request: web.Request) -> web.Response:
    order_id = request.match_info["id"]
    order = request.app[ORDERS].get(order_id)
    if order is None:
        return _json({"error": "no such order"}, 404)
    if request.headers.get("X-User") != order["owner"]:
        return _json({"error": "only the order's owner may do that"}, 403)
    try:
        version = int(request.query["version"])
    except (KeyError, ValueError):
        return _json({"error": "?version=N required (the timer_version you were given)"}, 400)
    result = await request.app[ENGINE].cancel(timer_key(order_id), version=version)
    status, message = {
        CancelResult.CANCELED: (200, "cancelled: the order will not expire"),
        CancelResult.CANCEL_REQUESTED: (
            202,
            "the expiry was already running; it was asked to stop: GET the order to see how "
            "it ended",
        ),
        CancelResult.ALREADY_DONE: (409, "too late: the timer has already run"),
        CancelResult.NOT_FOUND: (409, "no live timer with that version (stale request?)"),
    }[result]
    return _json({"id": order_id, "result": result.value, "message": message}, status)


async def get_order(request: web.Request) -> web.Response:
    order = request.app[ORDERS].get(request.match_info["id"])
    if order is None:
        return _json({"error": "no such order"}, 404)
    return _json(_order_view(request, order))


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


def create_app(
    engine: Engine, orders: Orders, *, timeout: float, grace: float = 10.0
) -> web.Application:
    """The web app. The engine is started with the app and closed (gracefully) with it."""
    app = web.Application()
    app[ENGINE] = engine
    app[ORDERS] = orders
    app[TIMEOUT] = timeout
    register_handlers(engine, orders)

    async def engine_ctx(app: web.Application) -> AsyncIterator[None]:
        await engine.start()
        await schedule_missing(engine, orders)
        try:
            yield
        finally:
            await engine.close(grace=grace)

    app.cleanup_ctx.append(engine_ctx)
    app.router.add_post("/orders", create_order)
    app.router.add_post("/orders/{id}/pay", pay_order)
    app.router.add_delete("/orders/{id}/timer", cancel_timer)
    app.router.add_get("/orders/{id}", get_order)
    return app


async def serve(args: argparse.Namespace) -> None:
    orders = Orders(args.db)
    engine = Engine(args.journal)
    app = create_app(engine, orders, timeout=args.timeout, grace=args.grace)
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.host, args.port))
    site = web.SockSite(runner, sock)
    await site.start()
    host, port = sock.getsockname()[:2]
    print(f"listening on http://{host}:{port}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    print("shutting down", flush=True)
    await runner.cleanup()  # stops the site, then closes the engine (cleanup_ctx)
    orders.close()
    print("stopped", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
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
    asyncio.run(serve(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
