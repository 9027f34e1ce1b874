"""Orders on FastAPI and PostgreSQL: each order and its timeout commit in one transaction.

    pip install 'wheel-engine[postgres,examples]'
    python examples/fastapi_orders_pg.py postgresql://localhost/shop --port 8080 --timeout 900

    curl -s -XPOST localhost:8080/orders -d '{"amount": 42}'
    curl -s -XPOST localhost:8080/orders/<id>/pay
    curl -s localhost:8080/orders/<id>

The timers live in the application's own database (``Engine("postgresql://...")``), so the
order's row and its timeout are written in one transaction (the transactional outbox):

- ``POST /orders`` inserts the order and schedules ``order.expire`` with ``connection=conn``: if
  the insert fails, no timer exists; if the schedule fails, no order exists.
- ``POST /orders/<id>/pay`` marks it PAID and cancels its timeout in one transaction: the
  cancel's ``CANCELED`` is what the commit makes true, so an order is never both paid and
  expired. A timeout that already fired (or runs) leaves the order as the handler left it.
- The handler expires the order only while it is still NEW (one conditional UPDATE), so a
  second firing of the same timer (at-least-once) changes nothing.
"""

from __future__ import annotations

import argparse
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from psycopg_pool import AsyncConnectionPool

from wheel_engine import CancelResult, Engine, Firing

CANCELED = CancelResult.CANCELED

__all__ = ["EXPIRE", "SCHEMA", "create_app", "main"]

EXPIRE = "order.expire"
SCHEMA = (
    "CREATE TABLE IF NOT EXISTS orders ("
    " id text PRIMARY KEY, amount numeric NOT NULL, state text NOT NULL DEFAULT 'NEW')"
)


class _Refused(Exception):
    """Rolls the request's transaction back; its text is the answer's error."""


def create_app(url: str, engine: Engine, *, timeout: float) -> FastAPI:
    """The app: a pool of the application's own connections to ``url``, and ``engine`` on the
    same database; the lifespan opens both and closes them."""
    pool = AsyncConnectionPool(url, open=False, min_size=1, max_size=8)

    @engine.handler(EXPIRE)
    async def expire(firing: Firing) -> None:
        async with pool.connection() as conn:
            await conn.execute(
                "UPDATE orders SET state = 'EXPIRED' WHERE id = %s AND state = 'NEW'",
                (firing.payload["order"],),
            )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await pool.open()
        async with pool.connection() as conn:
            await conn.execute(SCHEMA)
        async with engine:
            yield
        await pool.close()

    app = FastAPI(lifespan=lifespan)

    @app.post("/orders", status_code=201)
    async def create(body: dict[str, Any]) -> dict[str, Any]:
        order = uuid.uuid4().hex
        async with pool.connection() as conn, conn.transaction():
            await conn.execute(
                "INSERT INTO orders (id, amount) VALUES (%s, %s)", (order, body["amount"])
            )
            timer = await engine.schedule(
                EXPIRE,
                delay=timeout,
                key=f"expire:{order}",
                payload={"order": order},
                connection=conn,
            )
        return {"id": order, "state": "NEW", "expires": timer.due}

    @app.post("/orders/{order}/pay")
    async def pay(order: str) -> JSONResponse:
        try:
            async with pool.connection() as conn, conn.transaction():
                cur = await conn.execute(
                    "UPDATE orders SET state = 'PAID' WHERE id = %s AND state = 'NEW' RETURNING id",
                    (order,),
                )
                if await cur.fetchone() is None:
                    raise _Refused("not payable")
                if await engine.cancel(f"expire:{order}", connection=conn) is not CANCELED:
                    raise _Refused("expiring")  # it fired or runs: the payment rolls back
        except _Refused as refused:
            return JSONResponse({"error": str(refused)}, status_code=409)
        return JSONResponse({"id": order, "state": "PAID"})

    @app.get("/orders/{order}")
    async def show(order: str) -> JSONResponse:
        async with pool.connection() as conn:
            cur = await conn.execute("SELECT state FROM orders WHERE id = %s", (order,))
            row = await cur.fetchone()
        if row is None:
            return JSONResponse({"error": "no such order"}, status_code=404)
        return JSONResponse({"id": order, "state": row[0]})

    return app


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", help="postgresql://... (orders and timers)")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--timeout", type=float, default=900.0)
    args = parser.parse_args(argv)
    app = create_app(args.url, Engine(args.url), timeout=args.timeout)
    uvicorn.run(app, host="127.0.0.1", port=args.port)


if __name__ == "__main__":
    main(sys.argv[1:])
