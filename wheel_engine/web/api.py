"""The JSON API under ``/api/``: the pages' data, and the same actions for scripts.

Reads: ``GET /api/overview``, ``/api/timers?state=&handler=&prefix=&after=&limit=``,
``/api/timer?key=``, ``/api/nodes``. Writes (``POST``, a JSON object or a form; bearer token,
or a session cookie with ``csrf``): ``/api/redrive/preview`` (``key``, or ``handler``/``prefix``:
answers ``count``), ``/api/redrive`` (the same and ``expected``: the preview's count),
``/api/cancel`` and ``/api/run-now`` (``key``). Errors are ``{"error": "..."}`` with the HTTP
status that says why (401 who are you, 403 not allowed, 409 refused, 429 slow down).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from journal.errors import JournalError
from wheel_engine.web.guards import (
    Refused,
    dead_matching,
    query_from,
    redrive_confirmed,
    require_reader,
    write_request,
)

if TYPE_CHECKING:
    from wheel_engine.web.console import Console

__all__ = ["routes"]

Handler = Callable[[Request], Awaitable[Any]]


def _error(status: int, message: str) -> Response:
    return JSONResponse({"error": message}, status_code=status)


def routes(console: Console) -> list[Route]:
    def reader(fn: Handler) -> Callable[[Request], Awaitable[Response]]:
        async def run(request: Request) -> Response:
            try:
                require_reader(console, request)
                return JSONResponse(await fn(request))
            except Refused as exc:
                return _error(exc.status, str(exc))
            except JournalError as exc:  # unreadable, damaged: one line, named by the journal
                return _error(503, str(exc))

        return run

    def writer(
        fn: Callable[[Request, dict[str, str], str], Awaitable[Any]],
    ) -> Callable[[Request], Awaitable[Response]]:
        async def run(request: Request) -> Response:
            try:
                fields, who = await write_request(console, request)
                return JSONResponse(await fn(request, fields, who))
            except Refused as exc:  # ActionError included
                return _error(exc.status, str(exc))

        return run

    async def overview(request: Request) -> Any:
        return await console.read(console.source.overview)

    async def timers(request: Request) -> Any:
        return await console.read(console.source.timers, query_from(request.query_params))

    async def timer(request: Request) -> Any:
        key = request.query_params.get("key", "")
        data = await console.read(console.source.timer, key) if key else None
        if data is None:
            raise Refused(404, f"no timer with key {key!r}")
        return data

    async def nodes(request: Request) -> Any:
        data = await console.read(console.source.nodes)
        if data is None:
            raise Refused(404, "a journal file has one engine: nodes are PostgreSQL's")
        return data

    async def preview(request: Request, fields: dict[str, str], who: str) -> Any:
        keys, _key, _query = await dead_matching(console, fields)
        return {"count": len(keys), "keys": keys[:100]}

    async def redrive(request: Request, fields: dict[str, str], who: str) -> Any:
        return dataclasses.asdict(await redrive_confirmed(console, fields, who))

    async def cancel(request: Request, fields: dict[str, str], who: str) -> Any:
        assert console.actions is not None
        done = await console.write(console.actions.cancel, who, fields.get("key", ""))
        return dataclasses.asdict(done)

    async def run_now(request: Request, fields: dict[str, str], who: str) -> Any:
        key = fields.get("key", "")
        row = await console.read(console.source.row, key)
        assert console.actions is not None
        return dataclasses.asdict(await console.write(console.actions.run_now, who, key, row))

    return [
        Route("/api/overview", reader(overview)),
        Route("/api/timers", reader(timers)),
        Route("/api/timer", reader(timer)),
        Route("/api/nodes", reader(nodes)),
        Route("/api/redrive/preview", writer(preview), methods=["POST"]),
        Route("/api/redrive", writer(redrive), methods=["POST"]),
        Route("/api/cancel", writer(cancel), methods=["POST"]),
        Route("/api/run-now", writer(run_now), methods=["POST"]),
    ]
