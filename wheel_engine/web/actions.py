"""The console's writes: redrive, cancel, run now. Each one is logged with who, what and how
many (never a payload) on the ``wheel_engine.web.audit`` logger.

On a journal file they go, as the CLI's do, through the admin socket of the engine running on
it (``Engine(..., admin=True)``): the engine validates and commits them and they take effect at
once. With no engine serving a socket, a cancel is written straight into the journal
(:func:`wheel_engine.cli.direct.cancel`, which takes the journal's lock) and a redrive or
run-now is refused: they only mean something to a running engine. On PostgreSQL they are
transactions of the client the CLI uses, which every node sees.

- **redrive**: DEAD timers back to PENDING, due now, attempts reset (a new version). One key,
  or every DEAD timer matching a filter; always previewed first (:meth:`Actions.preview`
  counts), and the confirmation must name the count the preview showed: if the set changed
  meanwhile, nothing is done and the operator previews again. A bulk redrive is paced at
  ``redrive_rate`` timers per second, takes at most ``max_bulk`` timers, and waits
  ``bulk_cooldown`` seconds after the last one.
- **cancel**: one key (the engine answers CANCELED, CANCEL_REQUESTED, ALREADY_DONE or
  NOT_FOUND).
- **run now**: a PENDING timer rescheduled due now under its own key, handler and payload (a
  new version: the replaced one never fires); a DEAD one is redriven.

Nothing here takes a handler name or code from a request: every handler name comes from the
journal's own row of the key.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from journal.urls import is_postgres_url
from wheel_engine.admin.protocol import AdminError, AdminUnavailable, RemoteError, admin_path
from wheel_engine.web.config import Settings
from wheel_engine.web.errors import Refused
from wheel_engine.web.source import Query

if TYPE_CHECKING:
    from journal.postgres.client import PostgresClient

__all__ = ["ActionError", "Actions", "Outcome", "described"]

audit = logging.getLogger("wheel_engine.web.audit")

_PER_ACTION_TIMEOUT: Final = 30.0


class ActionError(Refused):
    """A write refused; the message says why, in one line, for the page."""

    def __init__(self, message: str, status: int = 409) -> None:
        super().__init__(status, message)


@dataclass(frozen=True, slots=True)
class Outcome:
    action: str
    count: int
    detail: str
    keys: tuple[str, ...] = ()


class Actions:
    """Writes to one journal; calls are synchronous (the app runs them in a worker thread of
    their own, apart from the reads)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.postgres = is_postgres_url(settings.db)
        self._bulk_lock = threading.Lock()
        self._last_bulk = -1e18
        self._client: PostgresClient | None = None

    def redrive(self, who: str, keys: list[str], expected: int, what: str, bulk: bool) -> Outcome:
        """Redrive ``keys`` (the DEAD timers matching now) if they are the ``expected`` many the
        preview showed."""
        if len(keys) != expected:
            audit.info("who=%s action=redrive %s refused: %d match, preview said %d",
                       who, what, len(keys), expected)  # fmt: skip
            raise ActionError(
                f"{len(keys)} DEAD timers match now, the preview showed {expected}: "
                "nothing was redriven; preview again"
            )
        if not keys:
            raise ActionError("no DEAD timer matches: nothing to redrive")
        if len(keys) > self.settings.max_bulk:
            raise ActionError(
                f"{len(keys)} timers match, more than one redrive takes "
                f"({self.settings.max_bulk}): narrow the filter"
            )
        if bulk and not self._bulk_lock.acquire(blocking=False):
            raise ActionError("another bulk redrive is running: wait for it", status=429)
        try:
            if bulk:
                wait = self._last_bulk + self.settings.bulk_cooldown - time.monotonic()
                if wait > 0:
                    raise ActionError(f"one bulk redrive at a time: retry in {wait:.0f}s", 429)
            done = self._redrive_keys(keys, paced=bulk)
        finally:
            if bulk:
                self._last_bulk = time.monotonic()
                self._bulk_lock.release()
        audit.info("who=%s action=redrive %s count=%d", who, what, len(done))
        return Outcome("redrive", len(done), f"{len(done)} timer(s) back to PENDING", tuple(done))

    def _redrive_keys(self, keys: list[str], *, paced: bool) -> list[str]:
        done: list[str] = []
        interval = 1.0 / self.settings.redrive_rate if paced else 0.0
        started = time.monotonic()
        for n, key in enumerate(keys):
            if interval:
                delay = started + n * interval - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
            try:
                self._one("redrive", key=key)
            except ActionError as exc:
                if done:  # report what was done before the refusal
                    audit.info("redrive stopped after %d of %d: %s", len(done), len(keys), exc)
                    break
                raise
            done.append(key)
        return done

    def cancel(self, who: str, key: str) -> Outcome:
        answer = self._one("cancel", key=key)
        result = str(answer.get("result", "?"))
        audit.info("who=%s action=cancel key=%r result=%s", who, key, result)
        return Outcome("cancel", 1 if result in ("CANCELED", "CANCEL_REQUESTED") else 0, result)

    def run_now(self, who: str, key: str, row: Any) -> Outcome:
        """``row``: the key's row as the source read it just before (None: no such timer)."""
        if row is None:
            raise ActionError(f"no timer with key {key!r}", status=404)
        state = str(row.state)
        if state == "DEAD":
            self._one("redrive", key=key)
        elif state == "PENDING":
            self._one("run_now", key=key, row=row)
        else:
            raise ActionError(f"timer {key!r} is {state}: only PENDING or DEAD timers run now")
        audit.info("who=%s action=run_now key=%r count=1", who, key)
        return Outcome("run_now", 1, "due now")

    # -- where a write goes ------------------------------------------------------------------

    def _one(self, command: str, **args: Any) -> dict[str, Any]:
        if self.postgres:
            return self._postgres(command, **args)
        return self._sqlite(command, **args)

    def _sqlite(self, command: str, **args: Any) -> dict[str, Any]:
        from wheel_engine.admin.client import request

        path = self.settings.db
        if command == "run_now":
            args = self._reschedule_args(args)
            command = "schedule"
        try:
            return request(
                admin_path(path),
                command,
                owner=os.stat(path).st_uid,
                timeout=_PER_ACTION_TIMEOUT,
                **args,
            )
        except AdminUnavailable:
            if command == "cancel":
                return self._cancel_directly(args["key"])
            raise ActionError(
                "no engine serves an admin socket on this journal: start the service's engine "
                "with Engine(..., admin=True) to redrive or run timers from here",
                status=503,
            ) from None
        except RemoteError as exc:
            raise ActionError(str(exc)) from None
        except (AdminError, OSError) as exc:
            raise ActionError(str(exc), status=502) from None

    @staticmethod
    def _reschedule_args(args: dict[str, Any]) -> dict[str, Any]:
        """The schedule that replaces a PENDING timer with the same one due now."""
        from wheel_engine.cli.common import decode_payload

        row = args["row"]
        return {
            "handler": row.handler,
            "key": row.key,
            "at": time.time(),
            "payload": decode_payload(row.payload),
            "on_conflict": "replace",
        }

    def _cancel_directly(self, key: str) -> dict[str, Any]:
        from wheel_engine.cli import direct
        from wheel_engine.cli.output import CliError

        try:
            result, _timer = asyncio.run(direct.cancel(self.settings.db, key, None))
        except CliError as exc:
            raise ActionError(str(exc), status=503) from None
        return {"result": result.value}

    def _postgres(self, command: str, **args: Any) -> dict[str, Any]:
        from journal.postgres.client import PostgresClient

        if self._client is None:  # its own connection: reads keep theirs on another thread
            self._client = PostgresClient.connect(self.settings.db)
        client = self._client
        key = args["key"]
        if command == "cancel":
            return {"result": str(client.cancel(key))}
        if command == "redrive":
            if client.redrive(key) is None:
                raise ActionError(f"timer {key!r} is not DEAD (any more)")
            return {}
        from journal.postgres.partitioning import partition_of
        from journal.postgres.writes import TimerUpsert

        row = args["row"]
        part = partition_of(key, client.partitions)
        request = TimerUpsert(key, part, row.handler, client.db_now(), row.payload)
        client.schedule_many([request])
        return {}

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


def described(query: Query) -> str:
    """A bulk redrive's filter, for the audit log."""
    return f"filter handler={query.handler!r} prefix={query.prefix!r}"
