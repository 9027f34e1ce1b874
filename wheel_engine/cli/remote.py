"""The writing commands ``schedule`` and ``cancel``: through a running engine, or straight in.

Each command first asks the engine running on the journal, through its admin socket
(``<journal>-admin.sock``, served by ``Engine(..., admin=True)``): the engine validates and
commits the change itself, and it takes effect at once. When no engine answers there, the
command takes the journal's lock and writes the record itself (:mod:`wheel_engine.cli.direct`);
the timer then fires at the next start of an engine with its handler. When an engine holds the
lock without serving the socket, the command changes nothing and exits 4, saying how to enable
the socket.

Exit codes: 0 done (a cancel that found the timer finished, ``ALREADY_DONE``, included); 1 the
command ran and refused (``NOT_FOUND``, an unknown handler, a duplicate key); 2 bad arguments;
3 the journal could not be used (missing, not a journal, damaged, the socket unusable); 4 an
engine without an admin socket holds the journal.

:func:`via_admin` is the first step on its own, for other writing commands (redrive, compact).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import math
import os
import time
from typing import Any, Final

from wheel_engine.admin.protocol import AdminError, AdminUnavailable, RemoteError, admin_path
from wheel_engine.cli.common import existing_journal
from wheel_engine.cli.output import (
    EXIT_ERROR,
    EXIT_OK,
    EXIT_PROBLEM,
    EXIT_USAGE,
    CliError,
    Output,
    fmt_age,
    fmt_time,
)
from wheel_engine.validation import MAX_TIME, ON_CONFLICT

__all__ = ["COMMANDS", "add_parsers", "cmd_cancel", "cmd_schedule", "parse_when", "via_admin"]

#: What ``schedule --on-conflict keep`` says when the key's live timer was left as it was,
#: through the engine as written directly (``cli.direct``'s note, word for word).
KEPT = "kept the live timer unchanged (--on-conflict keep)"
#: What an engine's refusal means for the exit code; any other code is EXIT_ERROR.
_REFUSAL_EXIT: Final = {
    "unknown_handler": EXIT_PROBLEM,
    "duplicate_key": EXIT_PROBLEM,
    "not_found": EXIT_PROBLEM,
    "not_dead": EXIT_PROBLEM,
    "invalid": EXIT_USAGE,
}


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add ``schedule`` and ``cancel`` to the ``wheel-engine`` parser's subcommands."""
    p = sub.add_parser(
        "schedule",
        parents=[common],
        help="schedule a timer (through the running engine's admin socket, or directly)",
        description="Schedule HANDLER at --at or after --delay. Goes through the admin socket "
        "of the engine running on DB when it serves one; otherwise takes the journal's lock "
        "and writes the schedule (it fires at the next start); exits 4 while an engine "
        "without the socket runs.",
    )
    p.add_argument("db", metavar="DB", help="the journal file (SQLite) or a postgresql:// URL")
    p.add_argument("handler", metavar="HANDLER", help="the handler's registered name")
    p.add_argument("--at", metavar="WHEN", help="epoch seconds or ISO 8601 with a zone")
    p.add_argument("--delay", metavar="SECONDS", help="seconds from now (>= 0)")
    p.add_argument("--key", metavar="K", help="the timer's key (default: a fresh one)")
    p.add_argument("--payload", metavar="JSON", help="the payload, as JSON (default: none)")
    p.add_argument(
        "--on-conflict",
        metavar="P",
        default="replace",
        help="when KEY names a live timer: replace (default), keep or error",
    )
    p = sub.add_parser(
        "cancel",
        parents=[common],
        help="cancel a timer (through the running engine's admin socket, or directly)",
        description="Cancel the timer KEY (only if --version is its live version, when given). "
        "Goes through the admin socket of the engine running on DB when it serves one; "
        "otherwise takes the journal's lock and writes the cancel; exits 4 while an engine "
        "without the socket runs. Exits 1 if there is no such timer or version (NOT_FOUND).",
    )
    p.add_argument("db", metavar="DB", help="the journal file (SQLite) or a postgresql:// URL")
    p.add_argument("key", metavar="KEY")
    p.add_argument("--version", metavar="V", dest="timer_version", help="the live version only")


# -- arguments -----------------------------------------------------------------------------------


def _usage(message: str) -> CliError:
    return CliError(message, code=EXIT_USAGE)


def parse_when(text: str, option: str = "--at") -> float:
    """Epoch seconds, or ISO 8601 with a zone (``2026-01-01T12:00:00Z``); exit 2 otherwise."""
    try:
        when = float(text)
    except ValueError:
        when = _iso_time(text, option)
    return _due_in_range(when, f"{option} {text!r}")


def _iso_time(text: str, option: str) -> float:
    try:
        stamp = dt.datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise _usage(
            f"{option} {text!r}: give epoch seconds or ISO 8601 with a zone "
            "(e.g. 2026-01-01T12:00:00Z)"
        ) from None
    if stamp.tzinfo is None:
        raise _usage(f"{option} {text!r}: give a time zone (e.g. a trailing Z for UTC)")
    return stamp.timestamp()


def _due_in_range(when: float, what: str) -> float:
    if not math.isfinite(when) or when < 0:
        raise _usage(f"{what}: not a time (it must be finite and not before 1970)")
    if when > MAX_TIME:  # the engine's own bound: it would refuse the time too
        raise _usage(f"{what}: after the year 9999")
    return when


def _parse_delay(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        raise _usage(f"--delay {text!r}: give a number of seconds") from None
    if not math.isfinite(seconds) or seconds < 0:
        raise _usage(f"--delay {text!r}: give a finite number of seconds >= 0")
    _due_in_range(time.time() + seconds, f"--delay {text!r}")
    return seconds


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _parse_payload(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text, parse_constant=_no_constant)
    except ValueError as exc:
        reason = getattr(exc, "msg", str(exc))
        raise _usage(f'--payload must be JSON, e.g. \'{{"order": "A1"}}\' ({reason})') from None


def _text(value: str, what: str) -> str:
    if not value:
        raise _usage(f"{what} must not be empty")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise _usage(f"{what} {value!r} is not valid UTF-8") from None
    return value


def _schedule_args(args: argparse.Namespace) -> dict[str, Any]:
    """The request as the admin protocol takes it; exit 2 for anything wrong."""
    if (args.at is None) == (args.delay is None):
        raise _usage("schedule needs exactly one of --at WHEN and --delay SECONDS")
    if args.on_conflict not in ON_CONFLICT:
        raise _usage(f"--on-conflict {args.on_conflict!r}: one of {', '.join(ON_CONFLICT)}")
    request: dict[str, Any] = {
        "handler": _text(args.handler, "HANDLER"),
        "payload": _parse_payload(args.payload),
        "on_conflict": args.on_conflict,
    }
    if args.key is not None:
        request["key"] = _text(args.key, "--key")
    if args.at is not None:
        request["at"] = parse_when(args.at)
    else:
        request["delay"] = _parse_delay(args.delay)
    return request


def _parse_version(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        version = int(text)
    except ValueError:
        raise _usage(f"--version {text!r}: give the timer's version, an integer") from None
    if version < 1:
        raise _usage(f"--version {text!r}: versions start at 1")
    return version


# -- the admin socket ----------------------------------------------------------------------------


def via_admin(db: str, command: str, **args: Any) -> dict[str, Any] | None:
    """The engine's answer through the journal's admin socket, or None if no engine serves one.

    Refusals become a ``CliError`` with the exit code they mean (1, 2 or 3).
    """
    from wheel_engine.admin.client import request

    path = existing_journal(db)
    try:
        return request(admin_path(path), command, owner=os.stat(path).st_uid, **args)
    except AdminUnavailable:
        return None
    except RemoteError as exc:
        raise CliError(f"{db}: {exc}", code=_REFUSAL_EXIT.get(exc.code, EXIT_ERROR)) from None
    except AdminError as exc:
        raise CliError(str(exc), code=EXIT_ERROR) from None


# -- the commands --------------------------------------------------------------------------------


def cmd_schedule(args: argparse.Namespace, out: Output) -> int:
    from wheel_engine.cli import direct

    request = _schedule_args(args)
    answer = via_admin(args.db, "schedule", **request)
    notes: list[str] = []
    if answer is not None:
        timer, via = answer["timer"], "engine"
        if answer.get("kept"):
            notes.append(KEPT)
    else:
        now = time.time()
        due = request["at"] if "at" in request else now + request["delay"]
        plan = direct.OfflineSchedule(
            request["handler"], due, request.get("key"), request["payload"], args.on_conflict
        )
        timer, notes = asyncio.run(direct.schedule(args.db, plan))
        via = "journal"
    kept = KEPT in notes
    _show_timer(out, {**timer, "via": via, "kept": kept}, "kept" if kept else "scheduled")
    for note in notes:
        out.note(note)
    return EXIT_OK


def cmd_cancel(args: argparse.Namespace, out: Output) -> int:
    from wheel_engine.cli import direct

    key = _text(args.key, "KEY")
    version = _parse_version(args.timer_version)
    answer = via_admin(args.db, "cancel", key=key, version=version)
    if answer is not None:
        result, timer, via = str(answer["result"]), answer["timer"], "engine"
    else:
        outcome, timer = asyncio.run(direct.cancel(args.db, key, version))
        result, via = outcome.value, "journal"
    return report_cancel(out, key, result, timer, via)


def report_cancel(
    out: Output, key: str, result: str, timer: dict[str, Any] | None, via: str
) -> int:
    """``cancel``'s output and exit code (also for a PostgreSQL journal)."""
    data = {"key": key, "result": result, "timer": _view(timer), "via": via}
    if out.json_mode:
        out.json(data)
    else:
        out.line(f"cancel {key}: {result} ({_explain(result, timer)})")
    return EXIT_PROBLEM if result == "NOT_FOUND" else EXIT_OK


def _explain(result: str, timer: dict[str, Any] | None) -> str:
    version = "" if timer is None else f"version {timer['version']} "
    state = "" if timer is None else timer["state"]
    return {
        "CANCELED": f"{version}will not fire",
        "CANCEL_REQUESTED": f"{version}was running: its handler was asked to stop",
        "ALREADY_DONE": f"{version}had already finished: {state}",
        "NOT_FOUND": "no such key" if timer is None else f"not the live {version.strip()}",
    }.get(result, result)


def _view(timer: dict[str, Any] | None) -> dict[str, Any] | None:
    """A timer's fields with its due time also in UTC, as every command shows it."""
    if timer is None:
        return None
    return {**timer, "due_utc": fmt_time(timer["due"])}


def _show_timer(out: Output, timer: dict[str, Any], verb: str) -> None:
    view = _view(timer)
    assert view is not None
    if out.json_mode:
        out.json(view)
        return
    out.line(
        f"{verb} {view['key']}: version {view['version']}, {view['state']}, "
        f"due {view['due_utc']} ({fmt_age(view['due'], time.time())}), "
        f"handler {view['handler']}, payload {json.dumps(view['payload'])}"
    )


#: The commands this module adds, for ``wheel_engine.cli``'s table.
COMMANDS: Final = {"schedule": cmd_schedule, "cancel": cmd_cancel}
