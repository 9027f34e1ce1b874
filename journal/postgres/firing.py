"""Firing on PostgreSQL: the attempt as one compare-and-set, and its fenced outcomes.

:func:`attempt` moves a batch of ``(key, version)`` from PENDING to RUNNING in one statement,
each only if all of this holds when the statement runs:

- the row is still that version and PENDING (not replaced, cancelled or claimed meanwhile);
- its due time has passed by the **database's** clock (never early across clock skew);
- its partition is owned by this node at the epoch this node holds, under an unexpired lease.

The partition rows are read ``FOR SHARE``: a takeover (which locks them ``FOR UPDATE``) either
waits for this statement, and then finds its RUNNING rows and returns them to PENDING, or goes
first, and then this statement sees the new epoch and claims nothing. So two nodes never both
claim one version under valid leases. It commits before any handler starts (autocommit).
A claim may carry **successors** (:class:`SuccessorRow`, recurring's next occurrences, #25):
then the claim and, for each claimed predecessor, ``INSERT ... ON CONFLICT (key) DO NOTHING``
of its successor run in one transaction (the partitions still held ``FOR SHARE``), so the two
are committed together or not at all, and a key that exists in any state is left as it is.

:func:`finish` records outcomes (SUCCEEDED, CANCELED, DEAD, or PENDING again for a retry),
each only if the row is still that version, RUNNING, and was claimed at that epoch: a node
that lost the partition, or a stale attempt, can never overwrite a newer outcome.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, NamedTuple

from psycopg import AsyncConnection

from journal.postgres.rows import COLUMNS, INSERT_PENDING, StoredTimer, arrays, stored
from journal.postgres.schema import DB_NOW
from journal.postgres.states import (
    DEAD_CODE,
    FINISHED_CODES,
    PENDING_CODE,
    REQUEUED_STATE,
    RUNNING_CODE,
)
from journal.state import CANCELED, DEAD, PENDING, STATE_CODE, SUCCEEDED, TimerState

__all__ = [
    "AttemptResult",
    "Claimed",
    "Outcome",
    "SuccessorRow",
    "attempt",
    "finish",
    "give_up",
    "requeue",
    "running_at",
    "unclaim",
]

#: The requests whose partition this node holds at their epoch (``mine``): the start of every
#: claim statement (this one, and a cluster-limited handler's in ``limiting``).
MINE: Final = (
    "WITH req AS (SELECT * FROM unnest(%(keys)s::text[], %(versions)s::bigint[],"
    "   %(parts)s::int[], %(epochs)s::bigint[]) AS r(key, version, partition, epoch)),"
    " owned AS (SELECT p.partition, p.epoch FROM wheel_partitions p"
    "   WHERE p.partition = ANY(%(parts)s::int[]) AND p.owner = %(node)s"
    f"   AND p.lease_until > {DB_NOW} FOR SHARE),"
    " mine AS (SELECT r.* FROM req r JOIN owned o"
    "   ON o.partition = r.partition AND o.epoch = r.epoch)"
)
#: What a claim sets on a row it takes (``m``: the request), and what it returns of it.
CLAIM_SET: Final = (
    f"UPDATE wheel_timers t SET state = {RUNNING_CODE}, attempts = t.attempts + 1,"
    f"   run_epoch = m.epoch, first_attempt_at = coalesce(t.first_attempt_at, {DB_NOW}),"
    "   cancel_requested = false"
)
CLAIM_RETURNING: Final = " RETURNING t.key, t.version, t.attempts, t.first_attempt_at, t.run_epoch"
_ATTEMPT: Final = (
    f"{MINE},"
    f" claimed AS ({CLAIM_SET}"
    "   FROM mine m WHERE t.key = m.key AND t.version = m.version"
    f" AND t.state = {PENDING_CODE}"
    f"   AND t.due <= {DB_NOW}"
    f"  {CLAIM_RETURNING})"
    f" SELECT key, version, attempts, first_attempt_at, run_epoch, NULL::float8, {DB_NOW}"
    " FROM claimed"
    " UNION ALL"
    f" SELECT t.key, t.version, NULL, NULL, NULL, t.due, {DB_NOW}"
    " FROM mine m JOIN wheel_timers t ON t.key = m.key AND t.version = m.version"
    f" WHERE t.state = {PENDING_CODE} AND t.due > {DB_NOW}"
)
_INSERT_ABSENT: Final = f"{INSERT_PENDING} ON CONFLICT (key) DO NOTHING RETURNING {COLUMNS}"
_FINISH: Final = (
    "UPDATE wheel_timers t SET state = o.state, due = coalesce(o.due, t.due),"
    " last_error = coalesce(o.error, t.last_error), cancel_requested = false,"
    f" finished_at = CASE WHEN o.state IN {FINISHED_CODES} THEN {DB_NOW} END"
    " FROM unnest(%(keys)s::text[], %(versions)s::bigint[], %(epochs)s::bigint[],"
    "   %(states)s::smallint[], %(errors)s::text[], %(dues)s::float8[], %(attempts)s::int[])"
    "   AS o(key, version, epoch, state, error, due, attempt)"
    " WHERE t.key = o.key AND t.version = o.version"
    f" AND t.state = {RUNNING_CODE} AND t.run_epoch = o.epoch"
    " AND (o.attempt IS NULL OR t.attempts = o.attempt)"
    " RETURNING t.key"
)
_GIVE_UP: Final = (
    f"UPDATE wheel_timers t SET state = {DEAD_CODE}, last_error = o.error"
    " FROM unnest(%(keys)s::text[], %(versions)s::bigint[], %(parts)s::int[],"
    "   %(epochs)s::bigint[], %(errors)s::text[]) AS o(key, version, partition, epoch, error)"
    " JOIN wheel_partitions p ON p.partition = o.partition AND p.epoch = o.epoch"
    f"  AND p.owner = %(node)s AND p.lease_until > {DB_NOW}"
    f" WHERE t.key = o.key AND t.version = o.version AND t.state = {PENDING_CODE}"
    " RETURNING t.key"
)
_UNCLAIM: Final = (
    f"UPDATE wheel_timers t SET state = {PENDING_CODE}, attempts = t.attempts - 1,"
    " first_attempt_at = CASE WHEN t.attempts = 1 THEN NULL ELSE t.first_attempt_at END"
    " FROM unnest(%(keys)s::text[], %(versions)s::bigint[], %(epochs)s::bigint[])"
    "   AS o(key, version, epoch)"
    " WHERE t.key = o.key AND t.version = o.version"
    f" AND t.state = {RUNNING_CODE} AND t.run_epoch = o.epoch"
    " AND NOT t.cancel_requested"
    " RETURNING t.key"
)
_RUNNING_AT: Final = (
    "SELECT t.key, t.version, t.attempts FROM wheel_timers t"
    " JOIN unnest(%(parts)s::int[], %(epochs)s::bigint[]) AS g(partition, epoch)"
    "   ON t.partition = g.partition AND t.run_epoch = g.epoch"
    f" WHERE t.state = {RUNNING_CODE}"
)
# Like the takeover's reset (``leases._RESET``), for rows this node claimed under the epoch it
# still holds; the attempts count guards against a claim made after the rows were read.
_REQUEUE: Final = (
    f"UPDATE wheel_timers t SET state = {REQUEUED_STATE},"
    f" finished_at = CASE WHEN t.cancel_requested THEN {DB_NOW} END, cancel_requested = false"
    " FROM unnest(%(keys)s::text[], %(versions)s::bigint[], %(epochs)s::bigint[],"
    "   %(attempts)s::int[]) AS o(key, version, epoch, attempts)"
    " WHERE t.key = o.key AND t.version = o.version"
    f" AND t.state = {RUNNING_CODE} AND t.run_epoch = o.epoch"
    " AND t.attempts = o.attempts"
    f" RETURNING {COLUMNS}"
)
#: The states an outcome may set, and whether it needs a new due time.
_OUTCOME_STATES: Final = {SUCCEEDED: False, CANCELED: False, DEAD: False, PENDING: True}


class Claimed(NamedTuple):
    """An attempt that was committed: run its handler."""

    key: str
    version: int
    attempt: int  #: 1-based, counted across retries, crashes and failovers
    first_attempt_at: float  #: the database's clock at attempt 1 (retry deadlines)
    epoch: int  #: pass it back in the :class:`Outcome`


class AttemptResult(NamedTuple):
    """What :func:`attempt` did. A requested key in neither list is lost to this node:
    replaced, cancelled, claimed already, or its partition is not held at that epoch."""

    claimed: list[Claimed]
    #: Still pending and held, but not due yet by the database's clock: ``(key, due)``.
    early: list[tuple[str, float]]
    #: The database's clock when the statement ran (None when nothing was asked of it).
    db_now: float | None
    #: The successors inserted with the claimed attempts (keys that existed are not here).
    chained: tuple[StoredTimer, ...] = ()


class SuccessorRow(NamedTuple):
    """A timer to insert, if its key is absent, in the transaction that claims
    ``predecessor`` (only if it claims it): the next occurrence of a recurrence."""

    predecessor: str
    key: str
    partition: int  #: ``partition_of(key, partitions)``: the predecessor's, for an occurrence
    handler: str
    due: float
    payload: bytes | None  #: msgpack bytes
    trace: str | None = None


class Outcome(NamedTuple):
    """How a claimed attempt ended. ``state`` PENDING is a retry due at ``due``."""

    key: str
    version: int
    epoch: int  #: :attr:`Claimed.epoch` of the attempt
    state: TimerState  #: SUCCEEDED, CANCELED, DEAD or PENDING
    error: str | None = None  #: the failure (retry, DEAD); None keeps the last one
    due: float | None = None  #: the retry's due time (PENDING only)
    #: :attr:`Claimed.attempt`, if known: the outcome of an earlier attempt (one written
    #: again after a lost reply) never ends a later one claimed under the same epoch.
    attempt: int | None = None


async def attempt(
    conn: AsyncConnection[Any],
    node: str,
    requests: Sequence[tuple[str, int, int, int]],
    successors: Sequence[SuccessorRow] = (),
) -> AttemptResult:
    """Claim ``(key, version, partition, epoch)`` requests in one statement (see module doc);
    with ``successors``, in one transaction with the insert of the claimed ones' successors."""
    if not requests:
        return AttemptResult([], [], None)
    if not successors:
        return await _attempt(conn, node, requests)
    async with conn.transaction():
        result = await _attempt(conn, node, requests)
        claimed = {c.key for c in result.claimed}
        wanted = [s for s in successors if s.predecessor in claimed]
        if not wanted:
            return result
        rows = [(s.key, s.partition, s.handler, s.due, s.payload, s.trace) for s in wanted]
        names = ("keys", "parts", "handlers", "dues", "payloads", "traces")
        cur = await conn.execute(_INSERT_ABSENT, arrays(rows, names))
        inserted = tuple(stored(row) for row in await cur.fetchall())
    return result._replace(chained=inserted)


async def _attempt(
    conn: AsyncConnection[Any],
    node: str,
    requests: Sequence[tuple[str, int, int, int]],
) -> AttemptResult:
    params = arrays(requests, ("keys", "versions", "parts", "epochs"), node=node)
    cur = await conn.execute(_ATTEMPT, params)
    claimed: list[Claimed] = []
    early: list[tuple[str, float]] = []
    db_now: float | None = None
    for key, version, attempts, first_at, epoch, due, now in await cur.fetchall():
        db_now = now
        if attempts is None:
            early.append((key, due))
        else:
            claimed.append(Claimed(key, version, attempts, first_at, epoch))
    return AttemptResult(claimed, early, db_now)


def _check(outcome: Outcome) -> None:
    needs_due = _OUTCOME_STATES.get(outcome.state)
    if needs_due is None:
        raise ValueError(f"an outcome cannot set state {outcome.state!r}: {outcome!r}")
    if needs_due != (outcome.due is not None):
        raise ValueError(f"a due time goes with a retry (PENDING) only: {outcome!r}")


async def finish(conn: AsyncConnection[Any], outcomes: Sequence[Outcome]) -> set[str]:
    """Record ``outcomes`` in one statement; return the keys whose outcome was accepted.

    A key missing from the result was rejected by the fence: the timer was replaced,
    cancelled, taken over by another node, or this attempt was not the live one. Raises
    ``ValueError`` (before writing anything) for an outcome that makes no sense.
    """
    for outcome in outcomes:
        _check(outcome)
    if not outcomes:
        return set()
    rows = [
        (o.key, o.version, o.epoch, STATE_CODE[o.state], o.error, o.due, o.attempt)
        for o in outcomes
    ]
    params = arrays(rows, ("keys", "versions", "epochs", "states", "errors", "dues", "attempts"))
    cur = await conn.execute(_FINISH, params)
    return {key for (key,) in await cur.fetchall()}


async def give_up(
    conn: AsyncConnection[Any],
    node: str,
    requests: Sequence[tuple[str, int, int, int, str]],
) -> set[str]:
    """Make PENDING ``(key, version, partition, epoch, error)`` DEAD without an attempt.

    For a timer that failover returned to PENDING after its last allowed attempt: that
    attempt was interrupted and there is no next one. Fenced like :func:`attempt` (the
    partition held at that epoch); returns the keys that were made DEAD.
    """
    if not requests:
        return set()
    params = arrays(requests, ("keys", "versions", "parts", "epochs", "errors"), node=node)
    cur = await conn.execute(_GIVE_UP, params)
    return {key for (key,) in await cur.fetchall()}


async def unclaim(conn: AsyncConnection[Any], claims: Sequence[tuple[str, int, int]]) -> set[str]:
    """Give back ``(key, version, epoch)`` attempts whose handlers never started: PENDING
    again, the attempt not charged (guarantee 5). Fenced like :func:`finish`; returns the keys
    given back. For a batch claimed while the node was closing, and after an :func:`attempt`
    call that failed without an answer (its commit may or may not have happened: whatever it
    claimed must not stay RUNNING under a live owner, where no takeover would ever reset it).
    A row whose cancel was requested meanwhile stays RUNNING: finish it as CANCELED.
    """
    if not claims:
        return set()
    params = arrays(claims, ("keys", "versions", "epochs"))
    cur = await conn.execute(_UNCLAIM, params)
    return {key for (key,) in await cur.fetchall()}


async def running_at(
    conn: AsyncConnection[Any], held: Sequence[tuple[int, int]]
) -> list[tuple[str, int, int]]:
    """``(key, version, attempts)`` of the rows RUNNING under the ``(partition, epoch)`` pairs
    ``held``: what this node claimed there and has not finished (see :func:`requeue`)."""
    if not held:
        return []
    cur = await conn.execute(_RUNNING_AT, arrays(held, ("parts", "epochs")))
    return [(key, version, attempts) for key, version, attempts in await cur.fetchall()]


async def requeue(
    conn: AsyncConnection[Any], claims: Sequence[tuple[str, int, int, int]]
) -> list[StoredTimer]:
    """``(key, version, epoch, attempts)`` rows RUNNING under this node's current epoch whose
    handler no longer runs here (its outcome was lost in an outage): PENDING again with their
    attempts kept (CANCELED if a cancel was requested), as a takeover would. Fenced by epoch
    and attempts; returns the rows changed."""
    if not claims:
        return []
    params = arrays(claims, ("keys", "versions", "epochs", "attempts"))
    cur = await conn.execute(_REQUEUE, params)
    return [stored(row) for row in await cur.fetchall()]
