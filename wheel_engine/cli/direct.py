"""``schedule`` and ``cancel`` straight into a journal no engine runs on.

When no engine serves an admin socket, the CLI writes the records itself, through the journal's
own API: :meth:`journal.Journal.open` (which takes the single-writer lock, so no engine can start
meanwhile), :meth:`~journal.Journal.recover` for the current state, and one
:meth:`~journal.Journal.submit` of a ``Schedule`` or ``Cancel`` record, committed before the
command reports success. No engine is started: nothing fires, and a stub handler is never
registered (it would run the timer, which is the service's job).

Why this is the same as an engine doing it: recovery returns the highest version ever issued
(``max_version``, kept through compaction), so the new schedule takes the next one and replaces
the key's older versions exactly as ``Engine.schedule`` would; a cancel names the live version,
so the fold applies it exactly as after ``Engine.cancel``. The next engine to start on the
journal recovers these records like its own.

Not checked here: whether a service registers ``handler``. The journal does not record which
handlers exist, so the timer is written as asked; an engine keeps a timer whose handler it does
not register (reported as unhandled) and fires it once the handler is registered. The command
warns when no timer in the journal has ever used that handler name (a typo, most likely).
Payloads are held to the engine's default ``max_payload_bytes``; a service configured with a
smaller limit still reads a bigger payload back.

Guarantee: a file that is not already a journal (empty, foreign SQLite, anything else) is
refused before anything is opened for writing: no lock file, no schema, not a byte changed.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from journal import Cancel, Journal, JournalError, JournalLocked, Schedule, apply
from wheel_engine.cli.common import decode_payload, open_readonly, translate_error
from wheel_engine.cli.output import EXIT_LOCKED, EXIT_PROBLEM, CliError
from wheel_engine.model import CancelResult
from wheel_engine.payload import encode_payload

if TYPE_CHECKING:
    from journal import Recovered, TimerRow

__all__ = ["MAX_PAYLOAD_BYTES", "OfflineSchedule", "cancel", "row_fields", "schedule"]

#: The engine's default ``max_payload_bytes``: the service's own setting is not in the journal.
MAX_PAYLOAD_BYTES: Final = 65536


@dataclass(frozen=True, slots=True)
class OfflineSchedule:
    """The offline CLI's ``schedule`` command, validated, for a journal no engine runs on: the
    due time is already absolute epoch seconds."""

    handler: str
    due: float
    key: str | None
    payload: Any
    on_conflict: str


def locked_message(path: str) -> str:
    return (
        f"{path}: an engine runs on this journal without an admin socket; start it with "
        "Engine(..., admin=True) to schedule and cancel while it runs, or stop it first"
    )


@asynccontextmanager
async def _writable(path: str) -> AsyncIterator[tuple[Journal, Recovered[TimerRow]]]:
    """The journal opened for writing (lock held) and its recovered state."""
    async with open_readonly(path):  # refuses what is not a journal before any write-open
        pass
    try:
        journal = await Journal.open(path)
    except JournalLocked:
        raise CliError(locked_message(path), code=EXIT_LOCKED) from None
    except (JournalError, OSError) as exc:
        raise translate_error(path, exc) from exc
    try:
        recovered = await journal.recover()
        yield journal, recovered
    except (JournalError, OSError) as exc:
        raise translate_error(path, exc) from exc
    finally:
        with suppress(JournalError, OSError):
            await journal.close()


def row_fields(row: TimerRow) -> dict[str, Any]:
    """A journal row as the same fields the admin channel returns for a timer."""
    return {
        "key": row.key,
        "version": row.version,
        "handler": row.handler,
        "due": row.due,
        "state": row.state,
        "attempts": row.attempts,
        "last_error": row.last_error,
        "payload": decode_payload(row.payload),
    }


async def schedule(path: str, request: OfflineSchedule) -> tuple[dict[str, Any], list[str]]:
    """Write the schedule; returns the resulting timer and remarks for the user."""
    packed = (
        None if request.payload is None else encode_payload(request.payload, MAX_PAYLOAD_BYTES)[0]
    )
    async with _writable(path) as (journal, recovered):
        timers = recovered.timers
        notes = []
        if not any(row.handler == request.handler for row in timers.values()):
            notes.append(
                f"no timer in this journal uses handler {request.handler!r} yet: check the "
                "name; the timer fires only once an engine registers that handler"
            )
        key = request.key if request.key is not None else _fresh_key(timers)
        live = timers.get(key)
        if live is not None and live.state in ("PENDING", "RUNNING"):
            if request.on_conflict == "keep":
                return row_fields(live), ["kept the live timer unchanged (--on-conflict keep)"]
            if request.on_conflict == "error":
                raise CliError(
                    f"key {key!r} names a live timer (version {live.version}); "
                    "--on-conflict replace or keep to go ahead",
                    code=EXIT_PROBLEM,
                )
        now = time.time()
        record = Schedule(key, recovered.max_version + 1, request.handler, request.due, packed, now)
        await journal.submit([record])
        apply(timers, record)  # the journal's own rule for what the record did
        notes.append("written to the journal: it fires when an engine with its handler runs")
        return row_fields(timers[key]), notes


def _fresh_key(timers: dict[str, TimerRow]) -> str:
    while True:  # 64 random bits: a clash is all but impossible, and checked anyway
        key = f"cli-{secrets.token_hex(8)}"
        if key not in timers:
            return key


async def cancel(
    path: str, key: str, version: int | None
) -> tuple[CancelResult, dict[str, Any] | None]:
    """Write the cancel if it applies; returns the result and the timer as it now is."""
    async with _writable(path) as (journal, recovered):
        row = recovered.timers.get(key)
        if row is None or (version is not None and version != row.version):
            return CancelResult.NOT_FOUND, None if row is None else row_fields(row)
        # Recovery reports an interrupted attempt as PENDING: with the lock held no handler
        # runs, so the timer is as cancellable as any pending one.
        if row.state != "PENDING":
            return CancelResult.ALREADY_DONE, row_fields(row)
        record = Cancel(key, row.version, time.time())
        await journal.submit([record])
        apply(recovered.timers, record)
        return CancelResult.CANCELED, row_fields(row)
