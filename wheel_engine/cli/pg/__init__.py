"""The CLI's commands on a PostgreSQL journal: a DB argument that is a ``postgresql://`` or
``postgres://`` URL comes here instead of to the SQLite commands.

Nothing in this package imports psycopg until a command runs (:mod:`.connection`), so the
SQLite commands never need it, and a missing driver is one line naming the extra to install.

A URL's password never reaches the output: every command prints :func:`mask_url` of it, and
every error goes through :func:`scrub` on its way out.
"""

from __future__ import annotations

import argparse
import importlib
import urllib.parse
from typing import Any, Final

from journal.urls import is_postgres_url

__all__ = ["command_for", "mask_url", "scrub"]

#: What a password is replaced with in anything shown.
MASK: Final = "***"
#: A bare password shorter than this is not searched for in error texts: it would match inside
#: ordinary words ("err" in "error") and mangle the message; the URL itself is still masked.
_MIN_SCRUBBED: Final = 4
#: command name -> (module in this package, function): imported only when the command runs.
_COMMANDS: Final = {
    "status": ("read", "cmd_status"),
    "list": ("read", "cmd_list"),
    "show": ("read", "cmd_show"),
    "check": ("check", "cmd_check"),
    "compact": ("write", "cmd_compact"),
    "redrive": ("write", "cmd_redrive"),
    "schedule": ("write", "cmd_schedule"),
    "cancel": ("write", "cmd_cancel"),
}


def command_for(args: argparse.Namespace) -> Any:
    """The PostgreSQL command for ``args``, or None when its DB is not a URL (or the command
    takes no DB)."""
    if not is_postgres_url(getattr(args, "db", None)) or args.command not in _COMMANDS:
        return None
    module, name = _COMMANDS[args.command]
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def _masked_userinfo(netloc: str) -> str:
    userinfo, at, hosts = netloc.rpartition("@")
    if not at or ":" not in userinfo:
        return netloc
    return f"{userinfo.split(':', 1)[0]}:{MASK}@{hosts}"


def _masked_query(query: str) -> str:
    parts = []
    for part in query.split("&"):
        name, eq, _ = part.partition("=")
        parts.append(f"{name}={MASK}" if eq and name.lower() == "password" else part)
    return "&".join(parts)


def mask_url(url: str) -> str:
    """``url`` with its password (in the user part or a ``password=`` parameter) replaced."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:  # unparsable (a bad IPv6 bracket...): show the scheme only
        return url.split("://", 1)[0] + "://" + MASK
    netloc, query = _masked_userinfo(parts.netloc), _masked_query(parts.query)
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc, query=query))


def _passwords(url: str) -> list[str]:
    """The password(s) written in ``url``, as written and percent-decoded."""
    found: list[str] = []
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return found
    userinfo, at, _ = parts.netloc.rpartition("@")
    if at and ":" in userinfo:
        found.append(userinfo.split(":", 1)[1])
    for part in parts.query.split("&"):
        name, eq, value = part.partition("=")
        if eq and name.lower() == "password":
            found.append(value)
    return [form for raw in found for form in {raw, urllib.parse.unquote(raw)} if form]


def scrub(text: str, url: str) -> str:
    """``text`` with ``url`` masked wherever it appears, and its password too."""
    text = text.replace(url, mask_url(url))
    for secret in sorted(_passwords(url), key=len, reverse=True):
        if len(secret) >= _MIN_SCRUBBED:
            text = text.replace(secret, MASK)
    return text
