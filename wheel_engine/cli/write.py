"""The writing commands ``compact`` and ``redrive``.

Each first asks the running engine through its admin socket (``<journal>-admin.sock``, served by
``Engine(..., admin=True)``): the engine does the work live, and a redriven timer fires when due
on that engine. When no engine runs they open an :class:`~wheel_engine.Engine` on the journal
with no handlers registered, so they take the journal's lock and fire nothing: every timer they
recover stays in the journal exactly as it was, and a redriven one fires at the next start of an
engine with its handler. While an engine without a socket holds the lock they refuse (exit 4).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wheel_engine.cli.common import file_size, open_engine, row_to_dict
from wheel_engine.cli.output import EXIT_OK, EXIT_PROBLEM, CliError, Output, fmt_bytes, fmt_time
from wheel_engine.cli.remote import parse_when, via_admin

if TYPE_CHECKING:
    from wheel_engine import Engine

__all__ = ["cmd_compact", "cmd_redrive"]


async def _records(engine: Engine) -> tuple[int, int]:
    """(snapshot rows, records appended since the snapshot)."""
    journal = engine.journal
    if journal is None:  # pragma: no cover - open_engine always gives a path
        return 0, 0
    info = await journal.info()
    return info.snapshot_rows, info.tail_records


def _file_and_wal(path: Path) -> tuple[int, int]:
    """The database file's size and its write-ahead log's (0 when there is none)."""
    sizes = []
    for name in (str(path), f"{path}-wal"):
        try:
            sizes.append(os.path.getsize(name))
        except OSError:
            sizes.append(0)
    return sizes[0], sizes[1]


async def cmd_compact(args: argparse.Namespace, out: Output) -> int:
    path = Path(args.db)
    before_bytes = file_size(path) if path.exists() else 0
    answer = via_admin(args.db, "compact")
    if answer is not None:
        return _report_live_compaction(args, out, answer, before_bytes)
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


def _report_live_compaction(
    args: argparse.Namespace, out: Output, answer: dict[str, Any], before_bytes: int
) -> int:
    # The rewrite is committed to the write-ahead log first: right after it, file + WAL can be
    # larger than before. The running engine checkpoints the WAL into the file later (and
    # truncates it), and the freed pages go back to the file system then: the sizes say so.
    after_file, after_wal = _file_and_wal(Path(args.db))
    if out.json_mode:
        out.json(
            {
                **answer,
                "bytes_before": before_bytes,
                "bytes_after": after_file + after_wal,
                "file_bytes_after": after_file,
                "wal_bytes_after": after_wal,
                "live": True,
            }
        )
    else:
        out.line(
            f"compacted {args.db} (by the running engine): {answer['records_before']} records "
            f"-> {answer['records_after']} in {answer['seconds']:.2f}s; file and WAL "
            f"{fmt_bytes(before_bytes)} before, now {fmt_bytes(after_file)} + "
            f"{fmt_bytes(after_wal)} WAL (the rewrite is in the WAL until the engine "
            "checkpoints it: the file shrinks then)"
        )
    return EXIT_OK


async def cmd_redrive(args: argparse.Namespace, out: Output) -> int:
    if args.key is None and not args.all_dead:
        raise CliError("redrive needs a KEY or --all-dead", code=2)
    if args.key is not None and args.all_dead:
        raise CliError("give either a KEY or --all-dead, not both", code=2)
    if args.key is not None and args.handler is not None:
        raise CliError("--handler only goes with --all-dead", code=2)
    at = parse_when(args.at) if args.at is not None else None
    answer = via_admin(
        args.db, "redrive", key=args.key, all_dead=args.all_dead, handler=args.handler, at=at
    )
    if answer is not None:
        done: list[dict[str, Any]] = list(answer["timers"])
        when = "the running engine fires them when due"
    else:
        done = await _redrive_directly(args, out, at)
        when = "they fire when an engine with their handler next starts on this journal"
    return _report_redrive(args, out, done, when)


async def _redrive_directly(
    args: argparse.Namespace, out: Output, at: float | None
) -> list[dict[str, Any]]:
    """Redrive with the journal's lock held, no engine running (see the module docstring)."""
    from wheel_engine import TimerState

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
    return done


#: When redriven timers fire, on a journal with several engines (PostgreSQL) or by default.
FIRE_WHEN_RUNNING = "they fire when an engine with their handler runs on this journal"


def _report_redrive(
    args: argparse.Namespace, out: Output, done: list[dict[str, Any]], when: str = FIRE_WHEN_RUNNING
) -> int:
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
    out.note(f"{len(done)} timer(s) back to PENDING with attempts reset; {when}")
    return EXIT_OK
