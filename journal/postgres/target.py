"""A PostgreSQL URL taken apart so that its password never reaches a message.

libpq quotes what it cannot parse: a password with a space or a bare ``%`` in a URL comes back
in its error text ("invalid percent-encoded token: ..."), and one with an unencoded ``@`` or
``/`` in the host or port it then fails to reach. So :class:`Target` takes the password out of
the URL itself (from the user part, or from ``?password=``) and hands it to the driver as a
separate keyword, which psycopg quotes into the connection string; libpq never parses it from
a URL, and nothing that echoes the URL can show it. :meth:`Target.scrub` then masks the
password (as given and as decoded) in any text, for defence in depth.

How the user part is found: it ends at the URL's last ``@`` before its query (a password may
hold ``@``, ``:`` and ``/`` unencoded; a ``?`` must be encoded). Its password is what follows
the first ``:``, percent-decoded where it is validly encoded and taken literally elsewhere.
"""

from __future__ import annotations

from typing import Any, Final
from urllib.parse import unquote

from journal.postgres.errors import describe

__all__ = ["MASK", "Target"]

#: What a password is replaced with in any text.
MASK: Final = "***"


class Target:
    """``url`` without its password (:attr:`url`), the password (:attr:`password`, or None),
    and ``host:port/dbname`` for messages (:attr:`where`). Its repr shows no password."""

    __slots__ = ("_secrets", "password", "url", "where")

    def __init__(self, url: str) -> None:
        self.url, self.password, raw = _split(url)
        self.where = describe(self.url)
        found = {s for s in (self.password, *raw) if s}
        self._secrets = sorted(found, key=len, reverse=True)  # longest first: no half masks

    def kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``psycopg.connect`` and the pool: the password, if any."""
        return {} if self.password is None else {"password": self.password}

    def scrub(self, text: str) -> str:
        """``text`` with the password (as given or decoded) masked."""
        for secret in self._secrets:
            text = text.replace(secret, MASK)
        return text

    def __repr__(self) -> str:
        return f"<Target {self.where}>"


def _split(url: str) -> tuple[str, str | None, list[str]]:
    """(URL without password, the password, its raw spellings as given)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url, None, []
    password: str | None = None
    raw: list[str] = []
    query_at = rest.find("?")
    at = rest.rfind("@", 0, query_at if query_at >= 0 else len(rest))
    if at >= 0:
        user, colon, given = rest[:at].partition(":")
        if colon:
            password = unquote(given)
            raw.append(given)
            rest = f"{user}@{rest[at + 1 :]}"
            query_at = rest.find("?")
    if query_at >= 0:
        kept = []
        for item in rest[query_at + 1 :].split("&"):
            name, _, value = item.partition("=")
            if unquote(name) == "password":
                password = unquote(value)
                raw.append(value)
            elif item:
                kept.append(item)
        rest = rest[:query_at] + ("?" + "&".join(kept) if kept else "")
    return f"{scheme}://{rest}", password, raw
