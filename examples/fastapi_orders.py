"""The order service on FastAPI: unpaid orders cancel themselves; the engine lives in ``lifespan``.

    pip install 'wheel-engine[examples]'      # fastapi, uvicorn (and aiohttp, httpx)
    python examples/fastapi_orders.py --port 8080 --timeout 900

    curl -s -XPOST localhost:8080/orders -H 'X-User: ann' -d '{"amount": 42}'
    curl -s -XPOST localhost:8080/orders/<id>/pay
    curl -s localhost:8080/orders/<id>
    curl -s -XDELETE 'localhost:8080/orders/<id>/timer?version=<v>' -H 'X-User: ann'

The same service as ``order_service.py`` (aiohttp), the same routes and answers; what each
request does and why it is safe under at-least-once firing is in ``orders_common.py``.

- The engine is started in the app's ``lifespan`` before the first request is served (with
  ``schedule_missing``: an order whose timer was lost in a crash between its two steps gets it
  back), and closed gracefully (``close(grace)``) after the last: running handlers get
  ``--grace`` seconds, timers stay in the journal and fire after the next start.
- Handlers are registered when the app is made, before ``start()``, so timers recovered from the
  journal fire as soon as the engine starts.
- Uvicorn turns SIGTERM and Ctrl-C into that shutdown (then re-raises the signal, so the process
  ends as a supervisor expects); do not also call ``engine.install_signal_handlers()``.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import orders_common as service
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from orders_common import EXPIRE, Orders, register_handlers, schedule_missing, start_sweep

from wheel_engine import Engine

__all__ = ["EXPIRE", "Orders", "create_app", "main"]


def _json(answer: tuple[int, dict[str, Any]]) -> JSONResponse:
    status, body = answer
    return JSONResponse(body, status_code=status)


def create_app(engine: Engine, orders: Orders, *, timeout: float, grace: float = 10.0) -> FastAPI:
    """The web app; its lifespan starts the engine and closes it (gracefully) at shutdown."""
    register_handlers(engine, orders)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await engine.start()
        try:
            await schedule_missing(engine, orders)
            await start_sweep(engine)
            yield
        finally:
            await engine.close(grace=grace)

    app = FastAPI(title="orders", lifespan=lifespan)

    @app.post("/orders")
    async def create_order(request: Request) -> JSONResponse:
        owner, body = request.headers.get("X-User"), await request.body()
        return _json(await service.create_order(engine, orders, owner, body, timeout))

    @app.post("/orders/{order_id}/pay")
    async def pay_order(order_id: str) -> JSONResponse:
        return _json(await service.pay_order(engine, orders, order_id))

    @app.delete("/orders/{order_id}/timer")
    async def cancel_timer(order_id: str, request: Request) -> JSONResponse:
        user, version = request.headers.get("X-User"), request.query_params.get("version")
        return _json(await service.cancel_timer(engine, orders, order_id, user, version))

    @app.get("/orders/{order_id}")
    async def get_order(order_id: str) -> JSONResponse:
        return _json(service.order_view(engine, orders, order_id))

    return app


def main(argv: list[str] | None = None) -> int:
    args = service.parse_args(__doc__, argv)
    orders = Orders(args.db)
    app = create_app(Engine(args.journal), orders, timeout=args.timeout, grace=args.grace)
    try:
        uvicorn.run(app, host=args.host, port=args.port)  # SIGTERM: lifespan shutdown
    finally:
        orders.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
