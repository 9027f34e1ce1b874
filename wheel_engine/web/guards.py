"""What every route checks before it does anything: who asks, whether writes are on, the CSRF
token, the rate limit; the filters a request may give, validated; and the steps a page and its
API twin share (the DEAD timers a redrive names, the confirmed redrive)."""

from __future__ import annotations

import hmac
import json
import urllib.parse
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from starlette.requests import Request

from journal.state import STATES
from wheel_engine.web.errors import Refused
from wheel_engine.web.source import MAX_PAGE, PAGE_SIZE, Query

if TYPE_CHECKING:
    from wheel_engine.web.actions import Outcome
    from wheel_engine.web.console import Console

__all__ = [
    "Refused",
    "body_fields",
    "dead_matching",
    "query_from",
    "redrive_confirmed",
    "require_reader",
    "require_writer",
    "write_request",
]

_STATES = {str(s) for s in STATES}
#: The largest form or JSON body read.
MAX_BODY = 64 * 1024


def _text(params: Mapping[str, Any], name: str) -> str | None:
    value = params.get(name)
    if value is None:
        return None
    value = str(value)
    if len(value) > 1024:
        raise Refused(400, f"{name} is too long")
    return value or None


def query_from(params: Mapping[str, Any]) -> Query:
    """The timers filter of a query string or a form; 400 for a state that is not one."""
    state = _text(params, "state")
    if state is not None:
        state = state.upper()
        if state not in _STATES:
            raise Refused(400, f"unknown state {state!r}: one of {', '.join(sorted(_STATES))}")
    try:
        limit = int(params.get("limit") or PAGE_SIZE)
    except ValueError:
        raise Refused(400, "limit must be a number") from None
    return Query(
        state=state,
        handler=_text(params, "handler"),
        prefix=_text(params, "prefix"),
        after=_text(params, "after"),
        limit=max(1, min(MAX_PAGE, limit)),
    )


async def body_fields(request: Request) -> dict[str, str]:
    """A urlencoded form or a JSON object, at most ``MAX_BODY`` bytes, as strings."""
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY:
            raise Refused(413, "request body too large")
    if request.headers.get("content-type", "").startswith("application/json"):
        try:
            data = json.loads(body or b"{}")
        except ValueError:
            raise Refused(400, "the body is not JSON") from None
        if not isinstance(data, dict):
            raise Refused(400, "the body must be a JSON object")
        return {str(k): "" if v is None else str(v) for k, v in data.items()}
    parsed = urllib.parse.parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    return {k: v[-1] for k, v in parsed.items()}


def require_reader(console: Console, request: Request) -> str:
    who = console.who(request)
    if who is None:
        raise Refused(401, "log in first (the token from --token-file)")
    return who


def require_writer(console: Console, request: Request, fields: Mapping[str, str]) -> str:
    """The writer's name, after every check a write needs, in this order: writes on, a known
    caller, same-origin, the CSRF token (for a cookie session), the rate limit."""
    if console.actions is None:
        raise Refused(403, "this console is read-only: start it with --allow-writes to act")
    bearer = console.bearer(request)
    session = console.session(request)
    if bearer is None and session is None:
        raise Refused(401, "log in first: writes need the token from --token-file")
    origin = request.headers.get("origin")
    if origin is not None:
        host = request.headers.get("host", "")
        if urllib.parse.urlsplit(origin).netloc != host:
            raise Refused(403, "a write from another origin is refused")
    if bearer is None:
        assert session is not None
        sent = fields.get("csrf", "")
        if not hmac.compare_digest(sent.encode(), session.csrf.encode()):
            raise Refused(403, "missing or wrong CSRF token: reload the page and try again")
    if not console.limiter.allow():
        raise Refused(429, "too many actions: wait a moment")
    return bearer if bearer is not None else session.who if session is not None else "?"


async def dead_matching(
    console: Console, fields: Mapping[str, str]
) -> tuple[list[str], str | None, Query]:
    """The DEAD timers a redrive names: ``key`` alone, or every one matching the filter."""
    key = fields.get("key") or None
    query = query_from(fields)
    if key is not None:
        row = await console.read(console.source.row, key)
        keys = [key] if row is not None and str(row.state) == "DEAD" else []
    else:
        keys = await console.read(console.source.dead_keys, query)
    return keys, key, query


async def write_request(console: Console, request: Request) -> tuple[dict[str, str], str]:
    """A write's fields and who sends it, after every check of :func:`require_writer`."""
    fields = await body_fields(request)
    return fields, require_writer(console, request, fields)


async def redrive_confirmed(console: Console, fields: Mapping[str, str], who: str) -> Outcome:
    """The redrive a preview's confirmation asks for (``expected``: the count it showed)."""
    from wheel_engine.web.actions import described

    keys, key, query = await dead_matching(console, fields)
    try:
        expected = int(fields.get("expected", ""))
    except ValueError:
        raise Refused(400, "preview first: the confirmation names the preview's count") from None
    what = f"key={key!r}" if key is not None else described(query)
    assert console.actions is not None
    return await console.write(console.actions.redrive, who, keys, expected, what, key is None)
