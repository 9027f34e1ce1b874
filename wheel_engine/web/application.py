"""The console as an ASGI application: :func:`app` builds a :class:`~.console.Console` and
its routes (the pages, the API, the static files) behind the strict headers."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles

from wheel_engine.web import api, pages
from wheel_engine.web.config import ConfigError, Settings, load_tokens
from wheel_engine.web.console import Console
from wheel_engine.web.security import SecurityHeaders

__all__ = ["app"]


def app(
    db: str,
    *,
    allow_writes: bool = False,
    token_file: str | None = None,
    tokens: dict[str, str] | None = None,
    show_payloads: bool = False,
    allowed_hosts: frozenset[str] | None = None,
    **options: Any,
) -> Starlette:
    """The console over ``db`` (a journal file or a ``postgresql://`` URL), as an ASGI app.

    Mount it in a Starlette or FastAPI service (``Mount("/timers", app=web.app("timers.db"))``)
    or serve it with ``wheel-engine web DB``. Read-only unless ``allow_writes``; writes need a
    token (``token_file``, or ``tokens`` as ``{token: who}``), and so does every page once a
    token is given. ``options``: the other :class:`~wheel_engine.web.config.Settings` fields.
    """
    known = dict(tokens or {})
    if token_file is not None:
        known.update(load_tokens(token_file))
    settings = Settings(
        db=db,
        allow_writes=allow_writes,
        show_payloads=show_payloads,
        tokens=known,
        allowed_hosts=allowed_hosts,
        **options,
    )
    if settings.allow_writes and not settings.tokens:
        raise ConfigError("refusing allow_writes without a token: every write needs one")
    console = Console(settings)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            console.close()

    static = StaticFiles(packages=[("wheel_engine.web", "static")])
    routes = [*pages.routes(console), *api.routes(console), Mount("/static", static)]
    application = Starlette(
        routes=routes,
        middleware=[Middleware(SecurityHeaders, allowed_hosts=settings.allowed_hosts)],
        lifespan=lifespan,
        exception_handlers={404: _not_found},
    )
    application.state.console = console
    return application


async def _not_found(request: Request, exc: Exception) -> Response:
    if request.url.path.startswith("/api/"):
        return JSONResponse({"error": "not found"}, status_code=404)
    return HTMLResponse("<!doctype html><title>Not found</title><p>Not found.</p>", 404)
