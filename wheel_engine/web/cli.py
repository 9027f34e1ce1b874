"""``wheel-engine web DB``: serve the console with uvicorn.

Every check that can refuse is made before the server binds: the extra is installed, the
journal exists and is one, the token file is safe, and the address is loopback unless a token
is given (one line on stderr, exit 2).
"""

from __future__ import annotations

import argparse
import logging
from typing import Any

from wheel_engine.cli.output import EXIT_OK, EXIT_USAGE, CliError, Output
from wheel_engine.extras import install_hint

__all__ = ["add_parser", "cmd_web"]

INSTALL_HINT = install_hint("web")
DEFAULT_PORT = 8740


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "web",
        parents=[common],
        help="serve the operator's web console (extra: wheel-engine[web])",
        description="Serve a web console over DB: overview, timers, one timer's history, and "
        "on PostgreSQL the nodes; a JSON API under /api/. Read-only unless --allow-writes. "
        "Binds 127.0.0.1 unless --host; another address needs --token-file.",
    )
    p.add_argument("db", metavar="DB", help="the journal file (SQLite) or a postgresql:// URL")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"default {DEFAULT_PORT}")
    p.add_argument("--allow-writes", action="store_true", help="enable redrive, cancel and run now")
    p.add_argument(
        "--token-file",
        metavar="F",
        help="tokens that may log in, one per line (NAME TOKEN or TOKEN); mode 0600",
    )
    p.add_argument("--show-payloads", action="store_true", help="show timers' payloads")


def _hosts(host: str, port: int) -> frozenset[str]:
    """The Host header values the console answers to (others: 421, against DNS rebinding)."""
    from wheel_engine.web.config import is_loopback

    names = {host}
    if is_loopback(host):
        names |= {"localhost", "127.0.0.1", "[::1]"}
    if host in ("0.0.0.0", "::"):
        return frozenset()  # any: the operator chose every interface; a token guards it
    return frozenset({n for name in names for n in (name, f"{name}:{port}")})


def cmd_web(args: argparse.Namespace, out: Output) -> int:
    try:
        import uvicorn

        from wheel_engine.web.application import app
        from wheel_engine.web.config import ConfigError, Settings, load_tokens, startup_problem
    except ImportError as exc:
        raise CliError(f"the web console needs its extra ({exc.name}): {INSTALL_HINT}") from None
    try:
        tokens = load_tokens(args.token_file) if args.token_file else {}
    except ConfigError as exc:
        raise CliError(str(exc), code=EXIT_USAGE) from None
    settings = Settings(db=args.db, allow_writes=args.allow_writes, tokens=tokens)
    problem = startup_problem(args.host, settings)
    if problem is not None:
        raise CliError(problem, code=EXIT_USAGE)
    hosts = _hosts(args.host, args.port)
    application = app(
        args.db,
        allow_writes=args.allow_writes,
        tokens=tokens,
        show_payloads=args.show_payloads,
        allowed_hosts=hosts or None,
    )
    logging.getLogger("wheel_engine.web").setLevel(logging.INFO)
    shown = f"[{args.host}]" if ":" in args.host else args.host
    out.note(f"wheel-engine console on http://{shown}:{args.port}/ (Ctrl-C to stop)")
    uvicorn.run(application, host=args.host, port=args.port, log_level="warning")
    return EXIT_OK
