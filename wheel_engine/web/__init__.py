"""The operator's web console (extra ``wheel-engine[web]``): :func:`app` is the ASGI app.

    from wheel_engine import web
    application = web.app("timers.db")                 # read-only, payloads hidden
    application = web.app("postgresql://...", allow_writes=True, token_file="tokens")

``wheel-engine web DB`` serves the same with uvicorn. Importing this package needs nothing
beyond the core install; calling :func:`app` needs the extra (Starlette, Jinja2).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from starlette.applications import Starlette

__all__ = ["app"]


def app(db: str, **options: Any) -> Starlette:
    """See :func:`wheel_engine.web.application.app` (the options are its keyword arguments)."""
    from wheel_engine.web.application import app as build

    return build(db, **options)
