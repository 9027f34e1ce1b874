"""The HTML pages: overview, timers, one timer, nodes, login, and the action forms.

Server-rendered, usable without JavaScript (``static/refresh.js`` only refreshes the
overview's counts). Every form that writes carries the session's CSRF token; a redrive always
goes through a preview page that shows how many timers it takes, and the confirmation must
name that count.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from journal.errors import JournalError
from wheel_engine.web.chart import bar_chart
from wheel_engine.web.guards import (
    Refused,
    body_fields,
    dead_matching,
    query_from,
    redrive_confirmed,
    require_reader,
    write_request,
)
from wheel_engine.web.security import COOKIE
from wheel_engine.web.source import DAY_BUCKETS, HOUR_BUCKETS, STATE_NAMES

if TYPE_CHECKING:
    from wheel_engine.web.console import Console

__all__ = ["routes"]

Page = Callable[[Request], Awaitable[Response]]


def _safe_next(target: str | None) -> str:
    """Only a path of this site to go back to after logging in (never another site)."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


def routes(console: Console) -> list[Route]:
    def page(fn: Callable[[Request], Awaitable[Response]]) -> Page:
        async def run(request: Request) -> Response:
            try:
                require_reader(console, request)
                return await fn(request)
            except Refused as exc:
                if exc.status == 401:
                    root = request.scope.get("root_path", "")
                    here = request.url.path.removeprefix(root) or "/"  # next= is in-app
                    if request.url.query:
                        here += f"?{request.url.query}"
                    quoted = urllib.parse.quote(here)
                    return RedirectResponse(f"{root}/login?next={quoted}", status_code=303)
                return _message(request, exc.status, str(exc))
            except JournalError as exc:  # unreadable, damaged: one line, named by the journal
                return _message(request, 503, str(exc))

        return run

    def _message(request: Request, status: int, text: str) -> Response:
        return console.render(request, "message.html", status=status, message=text)

    async def overview(request: Request) -> Response:
        data = await console.read(console.source.overview)
        hour_labels = [f"+{i * 5}m" for i in range(HOUR_BUCKETS[0])]
        day_labels = [f"+{i}h" for i in range(DAY_BUCKETS[0])]
        charts = {
            "hour": bar_chart(data["due"]["next_hour"], hour_labels, "due in the next hour"),
            "day": bar_chart(data["due"]["next_day"], day_labels, "due in the next day"),
        }
        return console.render(
            request, "overview.html", data=data, charts=charts, states=STATE_NAMES
        )

    async def timers(request: Request) -> Response:
        query = query_from(request.query_params)
        data = await console.read(console.source.timers, query)
        following = None
        if data["next_after"] is not None:
            params = {k: v for k, v in data["query"].items() if v is not None and k != "limit"}
            params["after"] = data["next_after"]
            following = urllib.parse.urlencode(params)
        return console.render(
            request, "timers.html", data=data, q=query, states=STATE_NAMES, following=following
        )

    async def timer(request: Request) -> Response:
        key = request.query_params.get("key", "")
        if not key:
            raise Refused(400, "give a key")
        data = await console.read(console.source.timer, key)
        if data is None:
            raise Refused(404, f"no timer with key {key!r}")
        return console.render(request, "timer.html", data=data, key=key)

    async def nodes(request: Request) -> Response:
        data = await console.read(console.source.nodes)
        if data is None:
            raise Refused(404, "a journal file has one engine: nodes are PostgreSQL's")
        return console.render(request, "nodes.html", data=data)

    async def login_form(request: Request) -> Response:
        nxt = _safe_next(request.query_params.get("next"))
        return console.render(request, "login.html", next=nxt, error=None)

    async def login(request: Request) -> Response:
        fields = await body_fields(request)
        nxt = _safe_next(fields.get("next"))
        if not console.logins.allow():
            error = "too many attempts: wait a moment"
            return console.render(request, "login.html", status=429, next=nxt, error=error)
        who = console.sessions.who_has(fields.get("token", ""))
        if who is None:
            return console.render(request, "login.html", status=401, next=nxt, error="wrong token")
        sid, _session = console.sessions.open(who)
        root = request.scope.get("root_path", "")
        response = RedirectResponse(f"{root}{nxt}", status_code=303)
        response.set_cookie(
            COOKIE,
            sid,
            max_age=int(console.settings.session_seconds),
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path=root or "/",
        )
        return response

    async def logout(request: Request) -> Response:
        fields = await body_fields(request)
        session = console.session(request)
        if session is not None and fields.get("csrf") == session.csrf:
            console.sessions.close(request.cookies.get(COOKIE))
        response = RedirectResponse(f"{request.scope.get('root_path', '')}/login", 303)
        response.delete_cookie(COOKIE, path=request.scope.get("root_path", "") or "/")
        return response

    def action(fn: Callable[[Request, dict[str, str], str], Awaitable[Response]]) -> Page:
        async def run(request: Request) -> Response:
            try:
                fields, who = await write_request(console, request)
                return await fn(request, fields, who)
            except Refused as exc:  # ActionError included
                return _message(request, exc.status, str(exc))

        return run

    async def redrive_preview(request: Request, fields: dict[str, str], who: str) -> Response:
        keys, key, query = await dead_matching(console, fields)
        return console.render(
            request, "preview.html", keys=keys[:20], count=len(keys), key=key, q=query
        )

    async def redrive(request: Request, fields: dict[str, str], who: str) -> Response:
        done = await redrive_confirmed(console, fields, who)
        key = fields.get("key") or None
        return console.render(request, "done.html", outcome=done, key=key)

    async def cancel(request: Request, fields: dict[str, str], who: str) -> Response:
        key = fields.get("key") or ""
        assert console.actions is not None
        done = await console.write(console.actions.cancel, who, key)
        return console.render(request, "done.html", outcome=done, key=key)

    async def run_now(request: Request, fields: dict[str, str], who: str) -> Response:
        key = fields.get("key") or ""
        row = await console.read(console.source.row, key)
        assert console.actions is not None
        done = await console.write(console.actions.run_now, who, key, row)
        return console.render(request, "done.html", outcome=done, key=key)

    return [
        Route("/", page(overview)),
        Route("/timers", page(timers)),
        Route("/timer", page(timer)),
        Route("/nodes", page(nodes)),
        Route("/login", login_form, methods=["GET"]),
        Route("/login", login, methods=["POST"]),
        Route("/logout", logout, methods=["POST"]),
        Route("/actions/redrive/preview", action(redrive_preview), methods=["POST"]),
        Route("/actions/redrive", action(redrive), methods=["POST"]),
        Route("/actions/cancel", action(cancel), methods=["POST"]),
        Route("/actions/run-now", action(run_now), methods=["POST"]),
    ]
