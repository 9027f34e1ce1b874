"""An aiohttp order service whose unpaid orders cancel themselves.

    python examples/order_service.py --port 8080 --timeout 900

    curl -s -XPOST localhost:8080/orders -H 'X-User: ann' -d '{"amount": 42}'
    curl -s -XPOST localhost:8080/orders/<id>/pay
    curl -s localhost:8080/orders/<id>
    curl -s -XDELETE 'localhost:8080/orders/<id>/timer?version=<v>' -H 'X-User: ann'

- ``POST /orders`` records an UNPAID order and schedules the timer ``order:<id>`` at its payment
  deadline; 202 with the order id and the timer's version.
- ``POST /orders/{id}/pay`` pays it and cancels its timer, or answers 409 (and refunds) if the
  timeout won the race: the orders table decides, not the timer call.
- ``DELETE /orders/{id}/timer?version=N`` lets the order's owner (``X-User``) stop the automatic
  cancellation; the version makes a stale request harmless.
- ``GET /orders/{id}`` shows the order and its timer.
- SIGTERM (or Ctrl-C) shuts down gracefully: stop accepting requests, let handlers finish (up
  to ``--grace`` seconds), flush and close the journal. Timers survive in the journal and fire
  after the next start, late ones at once.

What each request does, and why it is safe under at-least-once firing, is in
``orders_common.py`` (shared with the FastAPI version, ``fastapi_orders.py``). Needs the
``examples`` extra: ``pip install 'wheel-engine[examples]'``.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import socket
import sys
from collections.abc import AsyncIterator
from typing import Any

import orders_common as service
from aiohttp import web
from orders_common import EXPIRE, Orders, register_handlers, schedule_missing, start_sweep

from wheel_engine import Engine

__all__ = ["EXPIRE", "Orders", "create_app", "main"]

ENGINE = web.AppKey("engine", Engine)
ORDERS = web.AppKey("orders", Orders)
TIMEOUT = web.AppKey("timeout", float)


def _json(answer: tuple[int, dict[str, Any]]) -> web.Response:
    status, body = answer
    return web.json_response(body, status=status)


async def create_order(request: web.Request) -> web.Response:
    app, owner, body = request.app, request.headers.get("X-User"), await request.read()
    return _json(await service.create_order(app[ENGINE], app[ORDERS], owner, body, app[TIMEOUT]))


async def pay_order(request: web.Request) -> web.Response:
    app = request.app
    return _json(await service.pay_order(app[ENGINE], app[ORDERS], request.match_info["id"]))


async def cancel_timer(request: web.Request) -> web.Response:
    app = request.app
    return _json(
        await service.cancel_timer(
            app[ENGINE],
            app[ORDERS],
            request.match_info["id"],
            request.headers.get("X-User"),
            request.query.get("version"),
        )
    )


async def get_order(request: web.Request) -> web.Response:
    app = request.app
    return _json(service.order_view(app[ENGINE], app[ORDERS], request.match_info["id"]))


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
        await start_sweep(engine)
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
    args = service.parse_args(__doc__, argv)
    asyncio.run(serve(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
