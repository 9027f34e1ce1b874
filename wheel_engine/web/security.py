"""Who is asking, and the headers and checks every response and every write goes through.

- **Identity.** A request is someone when it carries ``Authorization: Bearer <token>`` with a
  token of the token file, or the session cookie the login form set (the token typed once,
  then a random session id: the token itself is never stored in the browser). Tokens are
  compared in constant time. With no token file, everyone on the loopback interface may read,
  and nobody may write.
- **CSRF.** Every session has its own random CSRF token, put into every form; a write by cookie
  without it is refused. A write by bearer token carries no ambient credential a page could
  borrow, so it needs none. A POST whose ``Origin`` is another site is refused as well.
- **Headers.** Every response: ``Cache-Control: no-store``, ``X-Frame-Options: DENY``, a CSP
  with ``frame-ancestors 'none'`` that allows only this origin's own stylesheet and script,
  ``X-Content-Type-Options: nosniff``, ``Referrer-Policy: same-origin``. No CORS header is ever
  sent, so other origins cannot read the API from a browser.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Final

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "COOKIE",
    "HEADERS",
    "RateLimiter",
    "SecurityHeaders",
    "Session",
    "Sessions",
]

COOKIE: Final = "wheel_session"
CSP: Final = (
    "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
HEADERS: Final = {
    "cache-control": "no-store",
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "content-security-policy": CSP,
    "referrer-policy": "same-origin",  # no-referrer would make the forms send Origin: null
    "cross-origin-opener-policy": "same-origin",
    "cross-origin-resource-policy": "same-origin",
}


class SecurityHeaders:
    """ASGI middleware: the strict headers on every response, and Host checked when asked."""

    def __init__(self, app: ASGIApp, allowed_hosts: frozenset[str] | None = None) -> None:
        self.app = app
        self.allowed_hosts = allowed_hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in HEADERS.items():
                    headers[name] = value
            await send(message)

        if self.allowed_hosts is not None and _host(scope) not in self.allowed_hosts:
            # A name that is not this console's: DNS rebinding, or a proxy not set up for it.
            await send_with_headers(
                {
                    "type": "http.response.start",
                    "status": 421,
                    "headers": [(b"content-type", b"text/plain; charset=utf-8")],
                }
            )
            await send({"type": "http.response.body", "body": b"unknown host name\n"})
            return
        await self.app(scope, receive, send_with_headers)


def _host(scope: Scope) -> str:
    for name, value in scope.get("headers", []):
        if name == b"host":
            host: str = value.decode("latin-1").lower()
            return host
    return ""


@dataclass(slots=True)
class Session:
    who: str
    csrf: str
    expires: float


class Sessions:
    """The tokens and the logged-in sessions (in memory: a restart logs everyone out)."""

    def __init__(self, tokens: dict[str, str], lifetime: float) -> None:
        self._tokens = dict(tokens)
        self._lifetime = lifetime
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()

    @property
    def required(self) -> bool:
        """A token file was given: every page needs a login."""
        return bool(self._tokens)

    def who_has(self, token: str) -> str | None:
        """The name of ``token`` in the token file, compared in constant time."""
        found = None
        for known, who in self._tokens.items():
            if hmac.compare_digest(known.encode(), token.encode()):
                found = who
        return found

    def open(self, who: str) -> tuple[str, Session]:
        sid = secrets.token_urlsafe(32)
        session = Session(who, secrets.token_urlsafe(32), time.monotonic() + self._lifetime)
        with self._lock:
            self._sessions[sid] = session
        return sid, session

    def get(self, sid: str | None) -> Session | None:
        if not sid:
            return None
        with self._lock:
            session = self._sessions.get(sid)
            if session is not None and session.expires < time.monotonic():
                del self._sessions[sid]
                return None
            return session

    def close(self, sid: str | None) -> None:
        with self._lock:
            self._sessions.pop(sid or "", None)


class RateLimiter:
    """A token bucket: ``rate`` actions per second, bursts of ``burst``."""

    def __init__(self, rate: float, burst: float) -> None:
        self.rate = rate
        self.burst = burst
        self._level = burst
        self._at = time.monotonic()
        self._lock = threading.Lock()

    def allow(self, cost: float = 1.0) -> bool:
        with self._lock:
            now = time.monotonic()
            self._level = min(self.burst, self._level + (now - self._at) * self.rate)
            self._at = now
            if self._level < cost:
                return False
            self._level -= cost
            return True
