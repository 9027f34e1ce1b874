""":class:`Console`: what the console's routes share (its source, writes, sessions, templates).

Every read runs on one worker thread of its own (the journal view and the PostgreSQL
connection are used by one thread at a time); every write on another, so a bulk redrive paced
over seconds never stalls the pages. Templates are Jinja2 with autoescaping on for every
template, so a key or an error holding ``<script>`` is shown as text.
"""

from __future__ import annotations

import asyncio
import functools
import urllib.parse
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from jinja2 import Environment, PackageLoader
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from journal.urls import is_postgres_url
from wheel_engine.cli.output import fmt_age, fmt_duration, fmt_time
from wheel_engine.web.actions import Actions
from wheel_engine.web.config import Settings
from wheel_engine.web.security import COOKIE, RateLimiter, Session, Sessions
from wheel_engine.web.source import Source, SqliteSource

__all__ = ["Console", "open_source"]

T = TypeVar("T")


def open_source(settings: Settings) -> Source:
    if is_postgres_url(settings.db):
        from wheel_engine.web.pg_source import PostgresSource

        return PostgresSource(settings.db, show_payloads=settings.show_payloads)
    from wheel_engine.cli.common import existing_journal

    existing_journal(settings.db)  # a clear line for a missing or foreign file, before serving
    return SqliteSource(settings.db, show_payloads=settings.show_payloads)


class Console:
    """The state one console app holds: its source, writes, sessions and templates."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.source = open_source(settings)
        self.actions = Actions(settings) if settings.allow_writes else None
        self.sessions = Sessions(settings.tokens, settings.session_seconds)
        self.limiter = RateLimiter(rate=2.0, burst=10.0)  # writes, all users together
        self.logins = RateLimiter(rate=1.0, burst=5.0)  # login attempts: guessing tokens
        self._reads = ThreadPoolExecutor(1, thread_name_prefix="wheel-web-read")
        self._writes = ThreadPoolExecutor(1, thread_name_prefix="wheel-web-write")
        self.env = Environment(
            loader=PackageLoader("wheel_engine.web", "templates"),
            autoescape=True,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.env.filters.update(
            utc=fmt_time, duration=_duration, age=fmt_age, quote=urllib.parse.quote
        )

    async def read(self, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._reads, functools.partial(fn, *args))

    async def write(self, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._writes, functools.partial(fn, *args))

    def close(self) -> None:
        self._writes.shutdown(wait=True)
        self._reads.shutdown(wait=True)
        if self.actions is not None:
            self.actions.close()
        self.source.close()

    # -- who is asking ---------------------------------------------------------------------

    def session(self, request: Request) -> Session | None:
        return self.sessions.get(request.cookies.get(COOKIE))

    def bearer(self, request: Request) -> str | None:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token:
            return None
        return self.sessions.who_has(token.strip())

    def who(self, request: Request) -> str | None:
        """The caller's name; "anonymous" when no token file is configured (reads only)."""
        name = self.bearer(request)
        if name is not None:
            return name
        session = self.session(request)
        if session is not None:
            return session.who
        return None if self.sessions.required else "anonymous"

    # -- rendering ---------------------------------------------------------------------------

    def render(self, request: Request, name: str, status: int = 200, **context: Any) -> Response:
        session = self.session(request)
        page = self.env.get_template(name).render(
            root=request.scope.get("root_path", ""),
            console=self,
            journal=self.source.name,
            journal_short=self.source.name.rsplit("/", 1)[-1] or self.source.name,
            kind=self.source.kind,
            writes=self.actions is not None,
            session=session,
            csrf=None if session is None else session.csrf,
            login_required=self.sessions.required,
            show_payloads=self.settings.show_payloads,
            **context,
        )
        return HTMLResponse(page, status_code=status)


def _duration(seconds: float | None) -> str:
    return "-" if seconds is None else fmt_duration(seconds)
