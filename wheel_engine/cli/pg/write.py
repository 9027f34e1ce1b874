"""``schedule``, ``cancel``, ``redrive`` and ``compact`` on a PostgreSQL journal.

The writes go straight to the database, while nodes run: each is the very conditional
statement a node runs (:mod:`journal.postgres.writes`), and ownership lives in the database,
not in a process, so there is no lock to take and no admin socket to ask. A schedule gets its
version from the journal's sequence and NOTIFYs its partition, whose owner loads it through the
change feed; a cancel moves only a PENDING row of the named version (a RUNNING one gets
``cancel_requested``, and its owner stops the handler: ``CANCEL_REQUESTED``); a redrive moves
only a DEAD row, of the version it read. ``compact`` has nothing to do: the partitions' owners
prune finished rows on their own.

Output and exit codes are the SQLite commands' (``via`` is ``"postgresql"``).
"""

from __future__ import annotations

import argparse
import secrets
from typing import TYPE_CHECKING, Any

from wheel_engine.cli.direct import MAX_PAYLOAD_BYTES, row_fields
from wheel_engine.cli.output import EXIT_OK, EXIT_PROBLEM, EXIT_USAGE, CliError, Output
from wheel_engine.cli.pg import mask_url
from wheel_engine.cli.pg.connection import connected, guarded, shown_args
from wheel_engine.cli.remote import (
    _parse_version,
    _schedule_args,
    _show_timer,
    _text,
    parse_when,
    report_cancel,
)
from wheel_engine.cli.write import _report_redrive
from wheel_engine.payload import encode_payload

if TYPE_CHECKING:
    from journal.postgres import PostgresClient, StoredTimer

__all__ = ["cmd_cancel", "cmd_compact", "cmd_redrive", "cmd_schedule"]

VIA = "postgresql"
#: ``compact``'s whole answer for a PostgreSQL journal.
NOTHING_TO_COMPACT = (
    "nothing to compact: a PostgreSQL journal keeps one row per timer, and the partitions' "
    "owners prune finished rows on their own (after the retention window)"
)


def _fields(timer: StoredTimer) -> dict[str, Any]:
    return {**row_fields(timer.row()), "partition": timer.partition}


def _no_nul(value: str, what: str) -> str:
    if "\x00" in value:  # PostgreSQL text cannot hold NUL: refuse it as bad input, not exit 3
        raise CliError(f"{what} {value!r} contains a NUL character", code=EXIT_USAGE)
    return value


def _packed(payload: Any) -> bytes | None:
    if payload is None:
        return None
    try:
        return encode_payload(payload, MAX_PAYLOAD_BYTES)[0]
    except (TypeError, ValueError) as exc:
        raise CliError(f"--payload: {exc}", code=EXIT_USAGE) from None


def _handler_note(client: PostgresClient, handler: str) -> list[str]:
    if client.count(handler=handler):
        return []
    return [
        f"no timer in this journal uses handler {handler!r} yet: check the name; the timer "
        "fires only once a node registers that handler"
    ]


@guarded
def cmd_schedule(args: argparse.Namespace, out: Output) -> int:
    from journal.postgres import LiveKeyConflict

    request = _schedule_args(args)
    handler = _no_nul(request["handler"], "HANDLER")
    key = _no_nul(request.get("key") or f"cli-{secrets.token_hex(8)}", "--key")
    packed = _packed(request["payload"])
    with connected(args.db) as client:
        notes = _handler_note(client, handler)
        # --delay counts from the database's clock: the one the nodes judge due times by.
        due = request["at"] if "at" in request else client.db_now() + request["delay"]
        try:
            [done] = client.schedule_many(
                [client.request(key, handler, due, packed, args.on_conflict)]
            )
        except LiveKeyConflict as exc:
            raise CliError(
                f"key {key!r} names a live timer (version {exc.version}); "
                "--on-conflict replace or keep to go ahead",
                code=EXIT_PROBLEM,
            ) from None
    if done.kept:
        notes.append("kept the live timer unchanged (--on-conflict keep)")
    else:
        notes.append(
            f"written to PostgreSQL (partition {done.timer.partition}): the node that owns it "
            "fires it; no node has to restart"
        )
    _show_timer(out, {**_fields(done.timer), "via": VIA}, "scheduled")
    for note in notes:
        out.note(note)
    return EXIT_OK


@guarded
def cmd_cancel(args: argparse.Namespace, out: Output) -> int:
    key = _text(args.key, "KEY")
    version = _parse_version(args.timer_version)
    with connected(args.db) as client:
        result = client.cancel(key, version)
        after = client.lookup(key)
    return report_cancel(out, key, result, None if after is None else _fields(after), VIA)


def _dead_targets(
    client: PostgresClient, args: argparse.Namespace, shown: str
) -> list[StoredTimer]:
    if args.key is None:
        return client.listing(state="DEAD", handler=args.handler, limit=None)
    timer = client.lookup(args.key)
    if timer is None:
        raise CliError(f"no timer with key {args.key!r} in {shown}", code=EXIT_PROBLEM)
    if timer.state != "DEAD":
        raise CliError(
            f"timer {args.key!r} is {timer.state}; only DEAD timers are redriven",
            code=EXIT_PROBLEM,
        )
    return [timer]


@guarded
def cmd_redrive(args: argparse.Namespace, out: Output) -> int:
    if args.key is None and not args.all_dead:
        raise CliError("redrive needs a KEY or --all-dead", code=EXIT_USAGE)
    if args.key is not None and args.all_dead:
        raise CliError("give either a KEY or --all-dead, not both", code=EXIT_USAGE)
    if args.key is not None and args.handler is not None:
        raise CliError("--handler only goes with --all-dead", code=EXIT_USAGE)
    at = parse_when(args.at) if args.at is not None else None  # default: now, by the DB
    done: list[dict[str, Any]] = []
    with connected(args.db) as client:
        targets = _dead_targets(client, args, mask_url(args.db))
        now = client.db_now()
        with out.progress("redriving", total=len(targets)) as bar:
            for n, timer in enumerate(targets, 1):
                # Only the version read as DEAD: one replaced or redriven meanwhile is left be.
                after = client.redrive(timer.key, at=at, version=timer.version)
                if after is not None:
                    done.append(_timer_view(after, now))
                bar.update(n, len(targets))
    if args.key is not None and not done:
        raise CliError(f"timer {args.key!r} changed meanwhile; not redriven", code=EXIT_PROBLEM)
    return _report_redrive(shown_args(args), out, done)


def _timer_view(timer: StoredTimer, now: float) -> dict[str, Any]:
    from wheel_engine.cli.common import row_to_dict

    return {**row_to_dict(timer, now=now), "partition": timer.partition}


@guarded
def cmd_compact(args: argparse.Namespace, out: Output) -> int:
    """Exit 0: the journal is already what compaction would make of it (see the module doc).
    It still connects, so a wrong URL or a database that is no journal fails as elsewhere."""
    shown = mask_url(args.db)
    with connected(args.db):
        pass
    if out.json_mode:
        out.json({"journal": shown, "compacted": False, "reason": NOTHING_TO_COMPACT})
    else:
        out.line(NOTHING_TO_COMPACT)
    return EXIT_OK
