"""The console's settings and the checks made before it serves anything.

Safe by default: read-only, payloads hidden, bound to the loopback interface. Each relaxation
is asked for by name (``--allow-writes``, ``--show-payloads``, ``--host``) and the combinations
that would expose the journal are refused at start with one line (:func:`startup_problem`):
another address without a token, writes without a token.

A token file holds one token per line, optionally after a name (``alice 3f9c...``): the name is
who the audit log says acted. Blank lines and ``#`` comments are skipped. The file must be its
owner's only (no group or other permission bits), like the journal, and each token at least
:data:`MIN_TOKEN` characters.
"""

from __future__ import annotations

import ipaddress
import os
import stat
from dataclasses import dataclass, field
from typing import Final

from wheel_engine.errors import WheelEngineError

__all__ = [
    "LOOPBACK_NAMES",
    "MIN_TOKEN",
    "ConfigError",
    "Settings",
    "is_loopback",
    "load_tokens",
    "startup_problem",
]

MIN_TOKEN: Final = 16
LOOPBACK_NAMES: Final = frozenset({"localhost", "127.0.0.1", "::1"})


class ConfigError(WheelEngineError, ValueError):
    """A setting the console refuses to start with; the message is one line."""


@dataclass(frozen=True, slots=True)
class Settings:
    """What :func:`wheel_engine.web.app` serves, and how."""

    db: str
    allow_writes: bool = False
    show_payloads: bool = False
    #: token -> who: the names the audit log gives
    tokens: dict[str, str] = field(default_factory=dict)
    #: timers redriven per second by a bulk redrive
    redrive_rate: float = 50.0
    #: the most timers one bulk redrive takes (a larger set: narrow the filter)
    max_bulk: int = 10_000
    #: seconds between two bulk redrives
    bulk_cooldown: float = 5.0
    #: Host header values accepted (None: any; the CLI sets the address it binds)
    allowed_hosts: frozenset[str] | None = None
    #: the session cookie's lifetime, seconds
    session_seconds: float = 8 * 3600.0


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def startup_problem(host: str, settings: Settings) -> str | None:
    """The one line that refuses to start, or None."""
    if not settings.tokens and not is_loopback(host):
        return (
            f"refusing to serve on {host}: another address than 127.0.0.1 needs "
            "--token-file (anyone who reaches it would read the journal)"
        )
    if settings.allow_writes and not settings.tokens:
        return "refusing --allow-writes without --token-file: every write needs the token"
    return None


def load_tokens(path: str) -> dict[str, str]:
    """``{token: who}`` from a token file; :class:`ConfigError` for a file not safe to trust."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise ConfigError(f"--token-file {path}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "r", encoding="utf-8") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(f"--token-file {path}: not a regular file")
        if stat.S_IMODE(st.st_mode) & 0o077:
            raise ConfigError(
                f"--token-file {path}: readable by others (mode "
                f"{stat.S_IMODE(st.st_mode):o}); chmod 600 it"
            )
        text = f.read()
    tokens: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) > 2:
            raise ConfigError(f"--token-file {path}: line {number}: give TOKEN or NAME TOKEN")
        who, token = (parts[0], parts[1]) if len(parts) == 2 else (f"token{number}", parts[0])
        if len(token) < MIN_TOKEN:
            raise ConfigError(
                f"--token-file {path}: line {number}: a token needs at least {MIN_TOKEN} "
                "characters (e.g. python -c 'import secrets; print(secrets.token_urlsafe())')"
            )
        tokens[token] = who
    if not tokens:
        raise ConfigError(f"--token-file {path}: no token in it")
    return tokens
