"""The ``wheel-engine`` command: look inside a journal, repair it, run the demo and benchmarks.

Reading commands (``status``, ``list``, ``show``, ``check``) open the journal read-only and work
while an engine runs on it. Writing commands (``schedule``, ``cancel``, ``redrive``,
``compact``) go through the running engine's admin socket when it serves one
(``Engine(..., admin=True)``), take the journal's lock and write directly when no engine runs
(the timers then fire at the next start), and otherwise refuse with exit code 4. Every command
takes ``--json`` for scripts.

DB may also be a ``postgresql://`` URL: those commands read and write the PostgreSQL journal
directly (:mod:`wheel_engine.cli.pg`), and never print the URL's password.

Exit codes: 0 ok; 1 the command ran and found a problem (``check`` failed, no such timer);
2 bad arguments; 3 the journal could not be read (missing, not a journal, damaged);
4 the journal is locked by a running engine; 130 interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import logging.handlers
import sqlite3
import sys
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["build_parser", "main"]

Command = Callable[[argparse.Namespace, Any], "int | Awaitable[int]"]
#: The ``web`` command's module (it imports the ``web`` extra only when the command runs).
_WEB = "wheel_engine.web.cli"


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--json",
        action="store_true",
        default=argparse.SUPPRESS,
        help="print one JSON document instead of tables",
    )
    parser = argparse.ArgumentParser(
        prog="wheel-engine",
        description="Durable asyncio timers: inspect and maintain a wheel-engine journal.",
        epilog="Writing commands (schedule, cancel, redrive, compact) go through the running "
        "engine's admin socket when it serves one (Engine(..., admin=True)), write the journal "
        "directly when no engine runs, and refuse (exit 4) while an engine without the socket "
        "runs. Exit codes: 0 ok, 1 problem found, 2 usage, 3 unreadable journal, 4 locked.",
    )
    parser.add_argument("--json", action="store_true", default=False, help=argparse.SUPPRESS)
    parser.add_argument("-v", "--verbose", action="store_true", help="log INFO to stderr")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of errors")
    from wheel_engine import COMPILED, __version__

    version = f"wheel-engine {__version__} ({'compiled' if COMPILED else 'pure Python'})"
    parser.add_argument("--version", action="version", version=version)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def db(p: argparse.ArgumentParser) -> None:
        p.add_argument("db", metavar="DB", help="the journal file (SQLite) or a postgresql:// URL")

    p = sub.add_parser(
        "status",
        parents=[common],
        help="counts by state, overdue and unhandled timers, journal size",
        description="Counts by state and handler, the oldest overdue timer, journal records and "
        "size. Read-only: works while an engine runs.",
    )
    db(p)
    p.add_argument(
        "--handlers",
        metavar="H1,H2",
        help="the handler names your service registers: timers for any other handler are "
        "reported as unhandled",
    )

    p = sub.add_parser(
        "list",
        parents=[common],
        help="list timers, in due order",
        description="Timers in (due, version) order. Read-only.",
    )
    db(p)
    p.add_argument(
        "--state",
        metavar="S",
        help="only this state: PENDING, RUNNING, SUCCEEDED, CANCELED or DEAD",
    )
    p.add_argument("--handler", metavar="H", help="only timers for this handler")
    p.add_argument(
        "--limit", metavar="N", type=int, default=100, help="show at most N (default 100; 0: all)"
    )

    p = sub.add_parser(
        "show",
        parents=[common],
        help="one timer: every field and its history",
        description="Every field of one timer and its records in the journal. Read-only.",
    )
    db(p)
    p.add_argument("key", metavar="KEY")

    p = sub.add_parser(
        "recurring",
        parents=[common],
        help="list recurrences: name, rule, time zone, next due, last outcome",
        description="The recurrences the journal holds (schedule_recurring). Read-only.",
    )
    db(p)

    p = sub.add_parser(
        "check",
        parents=[common],
        help="verify every record decodes and the state rebuilds",
        description="Verify the database pages, that every record decodes and that the state "
        "rebuilds. Exits 1 with the first problem. Read-only.",
    )
    db(p)

    p = sub.add_parser(
        "compact",
        parents=[common],
        help="rewrite the journal to its live state (through the running engine, or directly)",
        description="Rewrite the journal to its live state. Goes through the admin socket of "
        "the engine running on DB when it serves one; otherwise takes the journal's lock and "
        "compacts it directly; exits 4 while an engine without the socket runs. Engines also "
        "compact on their own.",
    )
    db(p)

    p = sub.add_parser(
        "redrive",
        parents=[common],
        help="put DEAD timers back to PENDING (through the running engine, or directly)",
        description="Put a DEAD timer (or all of them) back to PENDING with its attempts reset. "
        "Goes through the admin socket of the engine running on DB when it serves one (the "
        "timer fires when due, on that engine); otherwise takes the journal's lock and writes "
        "it directly (it fires at the next start of an engine with its handler); exits 4 while "
        "an engine without the socket runs.",
    )
    db(p)
    p.add_argument("key", metavar="KEY", nargs="?", help="the timer to redrive")
    p.add_argument("--all-dead", action="store_true", help="every DEAD timer")
    p.add_argument("--handler", metavar="H", help="with --all-dead: only this handler's")
    p.add_argument(
        "--at",
        metavar="WHEN",
        help="when to fire: epoch seconds or ISO 8601 with zone (default: now)",
    )

    p = sub.add_parser(
        "demo",
        parents=[common],
        help="orders that cancel themselves, with a crash in the middle",
        description="Creates orders in an SQLite table, pays some of them, lets the others time "
        "out, kills its worker with SIGKILL partway and restarts it, then checks every order.",
    )
    p.add_argument("--orders", type=int, default=3000, help="how many orders (default 3000)")
    p.add_argument("--quick", action="store_true", help="short timeouts: a few seconds in all")
    p.add_argument("--seed", type=int, default=None, help="random seed (default: random)")
    p.add_argument("--dir", default=None, help="keep the databases in this directory")
    p.add_argument("--no-crash", action="store_true", help="do not kill the worker")

    from wheel_engine.cli.run import BENCH_DESCRIPTION

    sub.add_parser(
        "bench",
        help="the side-by-side benchmark (a plug-in: pip install ./bench from a checkout)",
        description=BENCH_DESCRIPTION,
        add_help=False,  # --help goes to the benchmark's own parser, when it is installed
    )
    from wheel_engine.cli import remote

    remote.add_parsers(sub, common)  # schedule, cancel
    # The console's command, loaded by name as cli.pg's are: wheel_engine.web reuses this
    # package's read paths, so this package names it only at run time.
    importlib.import_module(_WEB).add_parser(sub, common)
    return parser


def _commands() -> dict[str, Command]:
    from wheel_engine.cli import read, recurring, remote, run, write

    return {
        **remote.COMMANDS,
        "status": read.cmd_status,
        "list": read.cmd_list,
        "show": read.cmd_show,
        "recurring": recurring.cmd_recurring,
        "check": read.cmd_check,
        "compact": write.cmd_compact,
        "redrive": write.cmd_redrive,
        "demo": run.cmd_demo,
        "bench": run.cmd_bench,
        "web": importlib.import_module(_WEB).cmd_web,
    }


def _command_for(args: argparse.Namespace) -> Command:
    """The command to run: a DB given as a ``postgresql://`` URL goes to ``cli.pg``."""
    from wheel_engine.cli import pg

    routed: Command | None = pg.command_for(args)
    return routed if routed is not None else _commands()[args.command]


def _configure_logging(verbose: bool) -> Callable[[bool], None]:
    """Log this package's and the journal's warnings (INFO with -v) to stderr, for this run only.

    Without -v the lines are held until the command ends, and shown only if it succeeded: an
    error is one line, whatever the library logged on the way (a failed commit logs a WARNING,
    then raises what the command reports). With -v they go out as they come.
    """
    stream = logging.StreamHandler(sys.stderr)
    stream.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    handler: logging.Handler = stream
    if not verbose:
        handler = logging.handlers.MemoryHandler(capacity=10_000, flushLevel=logging.CRITICAL + 1)
        handler.setTarget(stream)
    loggers = [logging.getLogger("wheel_engine"), logging.getLogger("journal")]
    saved = [(lg, lg.level) for lg in loggers]
    for lg in loggers:
        lg.addHandler(handler)
        lg.setLevel(logging.INFO if verbose else logging.WARNING)

    def undo(succeeded: bool) -> None:
        for lg, level in saved:
            lg.removeHandler(handler)
            lg.setLevel(level)
        if isinstance(handler, logging.handlers.MemoryHandler):
            if succeeded:
                handler.flush()
            handler.buffer.clear()

    return undo


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code (the console script exits with it)."""
    from journal.errors import JournalError
    from wheel_engine.cli.common import translate_error
    from wheel_engine.cli.output import EXIT_ERROR, EXIT_USAGE, CliError, Output

    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(args_list)
    except SystemExit as exc:  # --help, --version, usage errors
        return int(exc.code) if isinstance(exc.code, int) else EXIT_USAGE
    if args.command == "bench":
        if extra and extra[0] == "--":
            extra = extra[1:]
        args.bench_args = extra
    elif extra:
        parser.print_usage(sys.stderr)
        print(f"wheel-engine: error: unrecognized arguments: {' '.join(extra)}", file=sys.stderr)
        return EXIT_USAGE

    out = Output(json_mode=bool(getattr(args, "json", False)))
    undo_logging = _configure_logging(args.verbose)
    succeeded = False
    try:
        result = _command_for(args)(args, out)
        if asyncio.iscoroutine(result):
            result = asyncio.run(result)
        succeeded = int(result) < EXIT_USAGE  # type: ignore[arg-type]
        return int(result)  # type: ignore[arg-type]
    except CliError as exc:
        out.error(str(exc))
        return exc.code
    except (JournalError, sqlite3.DatabaseError) as exc:
        if args.debug:
            raise
        out.error(str(translate_error(getattr(args, "db", "journal"), exc)))
        return EXIT_ERROR
    except KeyboardInterrupt:
        out.error("interrupted")
        return 130
    except Exception as exc:
        if args.debug:
            raise
        out.error(f"{type(exc).__name__}: {exc} (run with --debug for the traceback)")
        return EXIT_ERROR
    finally:
        undo_logging(succeeded)
