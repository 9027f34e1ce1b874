"""The writing commands: ``compact`` and ``redrive``.

They open an :class:`~wheel_engine.Engine` on the journal with no handlers registered, so they
take the journal's lock (and refuse, exit code 4, while a service's engine holds it) and fire
nothing: every timer they recover stays in the journal exactly as it was.
"""

from __future__ import annotations

import argparse
import datetime as dt
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wheel_engine.cli.common import file_size, open_engine, row_to_dict
from wheel_engine.cli.output import EXIT_OK, EXIT_PROBLEM, CliError, Output, fmt_bytes, fmt_time

if TYPE_CHECKING:
    from wheel_engine import Engine

__all__ = ["cmd_compact", "cmd_redrive", "parse_when"]


def parse_when(text: str) -> float:
    """``--at``: epoch seconds, or an ISO 8601 time with a zone (``2026-01-01T12:00:00Z``)."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise CliError(f"--at {text!r}: not epoch seconds nor an ISO 8601 time", code=2) from exc
    if when.tzinfo is None:
        raise CliError(f"--at {text!r}: give a time zone (e.g. a trailing Z for UTC)", code=2)
    return when.timestamp()


async def _records(engine: Engine) -> tuple[int, int]:
    """(snapshot rows, records appended since the snapshot)."""
    journal = engine.journal
    if journal is None:  # pragma: no cover - open_engine always gives a path
        return 0, 0
    info = await journal.info()
    return info.snapshot_rows, info.tail_records


async def cmd_compact(args: argparse.Namespace, out: Output) -> int:
    path = Path(args.db)
    before_bytes = file_size(path) if path.exists() else 0
    async with open_engine(args.db) as engine:
        before = await _records(engine)
        with out.progress(f"compacting {args.db}") as bar:
            started = time.perf_counter()
            await engine.compact()
            elapsed = time.perf_counter() - started
            bar.update(1, 1)
        after = await _records(engine)
    data: dict[str, Any] = {
        "journal": str(path.resolve()),
        "snapshot_rows_before": before[0],
        "records_before": before[1],
        "snapshot_rows_after": after[0],
        "records_after": after[1],
        "bytes_before": before_bytes,
        "bytes_after": file_size(path),
        "seconds": round(elapsed, 3),
    }
    if out.json_mode:
        out.json(data)
    else:
        out.line(
            f"compacted {args.db}: {before[1]} records + {before[0]} snapshot rows -> "
            f"{after[1]} + {after[0]}, "
            f"{fmt_bytes(before_bytes)} -> {fmt_bytes(data['bytes_after'])} "
            f"in {elapsed:.2f}s"
        )
    return EXIT_OK


async def cmd_redrive(args: argparse.Namespace, out: Output) -> int:
    from wheel_engine import TimerState

    if args.key is None and not args.all_dead:
        raise CliError("redrive needs a KEY or --all-dead", code=2)
    if args.key is not None and args.all_dead:
        raise CliError("give either a KEY or --all-dead, not both", code=2)
    if args.key is not None and args.handler is not None:
        raise CliError("--handler only goes with --all-dead", code=2)
    at = parse_when(args.at) if args.at is not None else None
    now = time.time()
    done: list[dict[str, Any]] = []
    async with open_engine(args.db) as engine:
        if args.key is not None:
            info = engine.get(args.key)
            if info is None:
                raise CliError(f"no timer with key {args.key!r} in {args.db}", code=EXIT_PROBLEM)
            if info.state is not TimerState.DEAD:
                raise CliError(
                    f"timer {args.key!r} is {info.state.value}; only DEAD timers are redriven",
                    code=EXIT_PROBLEM,
                )
            keys = [args.key]
        else:
            keys = [t.key for t in engine.timers(state=TimerState.DEAD, handler=args.handler)]
        with out.progress("redriving", total=len(keys)) as bar:
            for n, key in enumerate(keys, 1):
                await engine.redrive(key, at=at)
                after = engine.get(key)
                if after is not None:
                    done.append(row_to_dict(after, now=now))
                bar.update(n, len(keys))
    if out.json_mode:
        out.json({"redriven": len(done), "timers": done})
        return EXIT_OK
    if not done:
        scope = f" for handler {args.handler!r}" if args.handler else ""
        out.line(f"no DEAD timers{scope} in {args.db}")
        return EXIT_OK
    for item in done:
        out.line(
            f"redriven {item['key']}: version {item['version']}, PENDING, "
            f"due {fmt_time(item['due'])}"
        )
    out.note(
        f"{len(done)} timer(s) back to PENDING with attempts reset; they fire when an engine "
        "with their handler runs on this journal"
    )
    return EXIT_OK
