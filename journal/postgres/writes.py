"""Schedule, cancel and redrive on PostgreSQL: from any node, each a conditional write.

- :func:`schedule_many` inserts or replaces timers in one transaction; every (re)schedule gets a
  new version from ``wheel_version_seq``. A replace draws its version *after* it holds the
  row's lock, so concurrent replaces of one key commit in version order: a key's version only
  ever grows. Versions are unique and never reused; they may have gaps.
- :func:`cancel` is one conditional update: PENDING becomes CANCELED; RUNNING keeps running
  with ``cancel_requested`` set, which its owner learns from the change feed (NOTIFY wakes it).
  A ``version`` that is not the live one is NOT_FOUND and changes nothing.
- :func:`redrive` gives a DEAD timer a new version, PENDING, attempts 0.

Each write NOTIFYs the timer's partition on commit, so its owner looks at the feed at once.
Synchronous twins (``*_sync``) serve the CLI; they run the same statements.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Literal, NamedTuple

from psycopg import AsyncConnection, Connection

from journal.postgres.errors import LiveKeyConflict
from journal.postgres.partitioning import partition_of
from journal.postgres.rows import COLUMNS, INSERT_PENDING, StoredTimer, arrays, stored
from journal.postgres.schema import DB_NOW, NOTIFY_CHANNEL
from journal.postgres.states import CANCELED_CODE, DEAD_CODE, LIVE_CODES, PENDING_CODE, RUNNING_CODE

__all__ = [
    "CancelOutcome",
    "Requests",
    "Scheduled",
    "TimerUpsert",
    "cancel",
    "cancel_sync",
    "redrive",
    "redrive_sync",
    "schedule_many",
    "schedule_many_sync",
    "write_rounds",
]

OnConflict = Literal["replace", "keep", "error"]
CancelOutcome = Literal["CANCELED", "CANCEL_REQUESTED", "ALREADY_DONE", "NOT_FOUND"]
_NOTIFY: Final = f"pg_notify('{NOTIFY_CHANNEL}', t.partition::text)"
#: States a cancel or a "keep"/"error" schedule treats as live (PENDING, RUNNING).
_LIVE: Final = (PENDING_CODE, RUNNING_CODE)
#: A cancel re-reads and retries when the row changed between its update and its read.
_CANCEL_TRIES: Final = 3

_UPSERT: Final = (
    f"{INSERT_PENDING}"
    " ON CONFLICT (key) DO UPDATE SET version = nextval('wheel_version_seq'),"
    "  handler = EXCLUDED.handler, due = EXCLUDED.due, payload = EXCLUDED.payload,"
    "  trace = EXCLUDED.trace,"
    f" state = {PENDING_CODE},"
    "  attempts = 0, last_error = NULL, first_attempt_at = NULL, run_epoch = NULL,"
    "  cancel_requested = false, finished_at = NULL"
    " {only_finished}"
    f" RETURNING {COLUMNS}, {_NOTIFY}"
)
_REPLACE: Final = _UPSERT.format(only_finished="")
_UNLESS_LIVE: Final = _UPSERT.format(only_finished=f"WHERE t.state NOT IN {LIVE_CODES}")
_READ: Final = f"SELECT {COLUMNS} FROM wheel_timers t WHERE t.key = ANY(%s::text[])"
_CANCEL: Final = (
    "UPDATE wheel_timers t"
    f" SET state = CASE WHEN t.state = {PENDING_CODE} THEN {CANCELED_CODE} ELSE {RUNNING_CODE} END,"
    f" cancel_requested = (t.state = {RUNNING_CODE}),"
    f" finished_at = CASE WHEN t.state = {PENDING_CODE} THEN {DB_NOW} END"
    f" WHERE t.key = %(key)s AND t.state IN {LIVE_CODES}"
    " AND (%(version)s::bigint IS NULL OR t.version = %(version)s::bigint)"
    f" RETURNING t.state, {_NOTIFY}"
)
_STATE_OF: Final = "SELECT version, state FROM wheel_timers WHERE key = %s"
_REDRIVE: Final = (
    "UPDATE wheel_timers t SET version = nextval('wheel_version_seq'),"
    f" state = {PENDING_CODE}, attempts = 0,"
    f" due = coalesce(%(at)s::float8, {DB_NOW}), first_attempt_at = NULL, run_epoch = NULL,"
    " cancel_requested = false, finished_at = NULL, trace = coalesce(%(trace)s::text, t.trace)"
    f" WHERE t.key = %(key)s AND t.state = {DEAD_CODE}"
    " AND (%(version)s::bigint IS NULL OR t.version = %(version)s::bigint)"
    f" RETURNING {COLUMNS}, {_NOTIFY}"
)


class TimerUpsert(NamedTuple):
    """One row to write into the PostgreSQL ``timers`` table (an upsert under ``on_conflict``),
    from a request the engine has already validated."""

    key: str
    partition: int  #: ``partition_of(key, partitions)``
    handler: str
    due: float
    payload: bytes | None  #: msgpack bytes
    on_conflict: OnConflict = "replace"
    trace: str | None = None  #: the trace context to store with it (tracing, #29)


class Scheduled(NamedTuple):
    """The timer a request left behind; ``kept``: it was a live one that "keep" kept."""

    timer: StoredTimer
    kept: bool


class Requests:
    """``request()`` for a handle that knows the journal's partition count (store, client)."""

    __slots__ = ()

    @property
    def partitions(self) -> int:
        raise NotImplementedError

    def partition_of(self, key: str) -> int:
        return partition_of(key, self.partitions)

    def request(
        self,
        key: str,
        handler: str,
        due: float,
        payload: bytes | None = None,
        on_conflict: OnConflict = "replace",
        trace: str | None = None,
    ) -> TimerUpsert:
        """A :class:`TimerUpsert` for ``key`` in its partition."""
        return TimerUpsert(key, self.partition_of(key), handler, due, payload, on_conflict, trace)


def _rounds(requests: Sequence[TimerUpsert]) -> list[list[TimerUpsert]]:
    """Split into consecutive runs of one policy kind with distinct keys: one ON CONFLICT
    statement may not touch a row twice, and later requests must see earlier ones."""
    rounds: list[list[TimerUpsert]] = []
    keys: set[str] = set()
    replace: bool | None = None
    for request in requests:
        kind = request.on_conflict == "replace"
        if not rounds or request.key in keys or kind != replace:
            rounds.append([])
            keys = set()
            replace = kind
        rounds[-1].append(request)
        keys.add(request.key)
    return rounds


def _upsert(batch: list[TimerUpsert]) -> tuple[str, dict[str, Any]]:
    statement = _REPLACE if batch[0].on_conflict == "replace" else _UNLESS_LIVE
    rows = [(*r[:5], r.trace) for r in batch]  # key, partition, handler, due, payload, trace
    names = ("keys", "parts", "handlers", "dues", "payloads", "traces")
    return statement, arrays(rows, names)


def _check_policy(requests: Sequence[TimerUpsert]) -> None:
    for request in requests:
        if request.on_conflict not in ("replace", "keep", "error"):
            raise ValueError(f"on_conflict must be replace, keep or error: {request!r}")


def _outcome(batch: list[TimerUpsert], written: list[Any], existing: list[Any]) -> list[Scheduled]:
    """Results in request order; raises :class:`LiveKeyConflict` for an "error" request."""
    done = {row[0]: stored(row) for row in written}
    kept = {row[0]: stored(row) for row in existing}
    results: list[Scheduled] = []
    for request in batch:
        timer = done.get(request.key)
        if timer is not None:
            results.append(Scheduled(timer, False))
            continue
        live = kept[request.key]
        if request.on_conflict == "error":
            raise LiveKeyConflict(request.key, live.version)
        results.append(Scheduled(live, True))
    return results


def _missing(batch: list[TimerUpsert], written: list[Any]) -> list[str]:
    done = {row[0] for row in written}
    return [r.key for r in batch if r.key not in done]


async def schedule_many(
    conn: AsyncConnection[Any], requests: Sequence[TimerUpsert]
) -> list[Scheduled]:
    """Write ``requests`` in order, in one transaction: all or none.

    Raises :class:`LiveKeyConflict` (and writes nothing) when an ``on_conflict="error"``
    request meets a live timer.
    """
    async with conn.transaction():
        return await write_rounds(conn, requests)


async def write_rounds(
    conn: AsyncConnection[Any], requests: Sequence[TimerUpsert]
) -> list[Scheduled]:
    """:func:`schedule_many`'s statements in the transaction ``conn`` has open (the caller's:
    see :mod:`journal.postgres.in_transaction`), which makes them all or none."""
    _check_policy(requests)
    results: list[Scheduled] = []
    for batch in _rounds(requests):
        statement, params = _upsert(batch)
        written = await (await conn.execute(statement, params)).fetchall()
        missing = _missing(batch, written)
        existing = await (await conn.execute(_READ, (missing,))).fetchall() if missing else []
        results += _outcome(batch, written, existing)
    return results


def schedule_many_sync(conn: Connection[Any], requests: Sequence[TimerUpsert]) -> list[Scheduled]:
    """:func:`schedule_many` on a synchronous connection (the CLI)."""
    _check_policy(requests)
    results: list[Scheduled] = []
    with conn.transaction():
        for batch in _rounds(requests):
            statement, params = _upsert(batch)
            written = conn.execute(statement, params).fetchall()
            missing = _missing(batch, written)
            existing = conn.execute(_READ, (missing,)).fetchall() if missing else []
            results += _outcome(batch, written, existing)
    return results


def _cancelled(updated: Any) -> CancelOutcome:
    return "CANCELED" if updated[0] == 3 else "CANCEL_REQUESTED"


def _unchanged(current: Any, version: int | None) -> CancelOutcome | None:
    """Why a cancel changed nothing, from the row read after it; None: the row went live
    meanwhile (rescheduled), so try again."""
    if current is None or (version is not None and current[0] != version):
        return "NOT_FOUND"
    return None if current[1] in _LIVE else "ALREADY_DONE"


async def cancel(conn: AsyncConnection[Any], key: str, version: int | None = None) -> CancelOutcome:
    """Cancel ``key`` (only ``version`` when given) from any node; see the module doc."""
    params = {"key": key, "version": version}
    for _ in range(_CANCEL_TRIES):
        updated = await (await conn.execute(_CANCEL, params)).fetchone()
        if updated is not None:
            return _cancelled(updated)
        why = _unchanged(await (await conn.execute(_STATE_OF, (key,))).fetchone(), version)
        if why is not None:
            return why
    return "NOT_FOUND"  # pragma: no cover - rescheduled under us three times in a row


def cancel_sync(conn: Connection[Any], key: str, version: int | None = None) -> CancelOutcome:
    """:func:`cancel` on a synchronous connection (the CLI)."""
    params = {"key": key, "version": version}
    for _ in range(_CANCEL_TRIES):
        updated = conn.execute(_CANCEL, params).fetchone()
        if updated is not None:
            return _cancelled(updated)
        why = _unchanged(conn.execute(_STATE_OF, (key,)).fetchone(), version)
        if why is not None:
            return why
    return "NOT_FOUND"  # pragma: no cover - rescheduled under us three times in a row


async def redrive(
    conn: AsyncConnection[Any],
    key: str,
    *,
    at: float | None = None,
    version: int | None = None,
    trace: str | None = None,
) -> StoredTimer | None:
    """A DEAD ``key`` back to PENDING as a new version, due at ``at`` (default: now by the
    database's clock), attempts 0, with the redriver's ``trace`` context (default: its own
    kept). None when it is not DEAD (or not ``version``)."""
    params = {"key": key, "at": at, "version": version, "trace": trace}
    cur = await conn.execute(_REDRIVE, params)
    row = await cur.fetchone()
    return None if row is None else stored(row)


def redrive_sync(
    conn: Connection[Any], key: str, *, at: float | None = None, version: int | None = None
) -> StoredTimer | None:
    """:func:`redrive` on a synchronous connection (the CLI)."""
    params = {"key": key, "at": at, "version": version, "trace": None}
    row = conn.execute(_REDRIVE, params).fetchone()
    return None if row is None else stored(row)
