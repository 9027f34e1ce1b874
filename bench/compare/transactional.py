"""Figure 9: an order and its timeout in one transaction, from 50 concurrent connections.

Needs a PostgreSQL server, as figure 8 (``WHEEL_ENGINE_BENCH_POSTGRES``); without it the figure
is skipped with one line. Each round makes a database of its own with an ``orders`` table, then
:data:`CONNECTIONS` connections each run their share of the transactions, all at once; one
transaction is ``INSERT`` of one order row plus, per contender:

- **bare insert** (the anchor): nothing more, what the application pays without any timer;
- **wheel-engine**: ``engine.schedule(..., delay=900, connection=conn)`` (its timeout, in the
  transaction: ``docs/guide/several-nodes.md``), one running engine on the same database;
- **procrastinate**: ``task.configure(connection=conn, schedule_in=...).defer_async(...)``, its
  defer on the same connection (skipped where procrastinate is not installed).

*rate* = transactions committed per second (all connections together). No timer comes due
during a round: this is the cost of writing the timer with the order, not of firing it.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Final

from bench.compare.config import Config
from bench.compare.measure import RATE, Comparison, Contender, Figure, Metrics
from bench.compare.nodes import URL_ENV, _drop, _fresh_database, _sql

#: Concurrent connections, each with its own stream of transactions.
CONNECTIONS: Final = 50
#: Seconds ahead each timer is due: none fires during the round.
TIMEOUT: Final = 900.0
BARE, ENGINE, PEER = "bare insert", "wheel-engine schedule(connection=)", "procrastinate defer"
FIGURE = Figure("9", RATE)

Write = Callable[[Any, str], Awaitable[None]]


def _procrastinate() -> Any:
    try:
        import procrastinate
    except ImportError:
        return None
    return procrastinate


async def _drive(url: str, total: int, write: Write) -> float:
    """Seconds for ``total`` order transactions over :data:`CONNECTIONS` connections."""
    import psycopg

    conns = [await psycopg.AsyncConnection.connect(url) for _ in range(CONNECTIONS)]

    async def stream(conn: Any, n: int, first: int) -> None:
        for i in range(first, first + n):
            async with conn.transaction():
                order = f"o{i}"
                await conn.execute("INSERT INTO orders (id, state) VALUES (%s, 'NEW')", (order,))
                await write(conn, order)

    share = total // CONNECTIONS
    try:
        t0 = time.perf_counter()
        await asyncio.gather(*(stream(c, share, k * share) for k, c in enumerate(conns)))
        return time.perf_counter() - t0
    finally:
        for conn in conns:
            await conn.close()


async def _bare(url: str, total: int) -> float:
    async def nothing(conn: Any, order: str) -> None:
        return None

    return await _drive(url, total, nothing)


async def _engine(url: str, total: int) -> float:
    from wheel_engine import Engine

    engine = Engine(url, node="bench")
    engine.register("order.expire", lambda firing: None)
    async with engine:

        async def schedule(conn: Any, order: str) -> None:
            await engine.schedule(
                "order.expire", delay=TIMEOUT, key=order, payload={"order": order}, connection=conn
            )

        return await _drive(url, total, schedule)


async def _peer(url: str, total: int) -> float:
    procrastinate = _procrastinate()
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=url))

    @app.task(name="order.expire")  # type: ignore[untyped-decorator]  # procrastinate: Any
    async def expire(order: str) -> None:
        return None

    async with app.open_async():
        await app.schema_manager.apply_schema_async()

        async def defer(conn: Any, order: str) -> None:
            deferrer = expire.configure(connection=conn, schedule_in={"seconds": TIMEOUT})
            await deferrer.defer_async(order=order)

        return await _drive(url, total, defer)


def _round(
    server: str, side: Callable[[str, int], Coroutine[Any, Any, float]], total: int
) -> Metrics:
    name = f"wheel_bench_tx_{os.getpid()}"
    url = _fresh_database(server, name)
    try:
        _sql(url, "CREATE TABLE orders (id text PRIMARY KEY, state text NOT NULL)")
        seconds = asyncio.run(side(url, total))
    finally:
        _drop(server, name)
    return {"rate": total / seconds, "seconds": seconds}


def run(cfg: Config, series: dict[str, Any]) -> list[Comparison]:
    server = os.environ.get(URL_ENV)
    if not server:
        cfg.log(f"transactional: skipped: set {URL_ENV} to a PostgreSQL server URL (figure 9)")
        return []
    total = 2_000 if cfg.quick else 10_000
    reps = 1 if cfg.quick else 3
    skip = None if _procrastinate() is not None else "procrastinate not installed"
    contenders = [
        Contender(BARE, lambda: _round(server, _bare, total)),
        Contender(ENGINE, lambda: _round(server, _engine, total)),
        Contender(PEER, lambda: _round(server, _peer, total), skip=skip),
    ]
    comparison = FIGURE.compare(
        cfg,
        key="transactional.50",
        title=f"an order and its timeout in one transaction, {CONNECTIONS} connections",
        contenders=contenders,
        anchor=BARE,
        reps=reps,
        params={"connections": CONNECTIONS, "transactions": total},
    )
    return [comparison]
