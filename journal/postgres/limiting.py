"""Cluster-wide flow control (``limit_scope="cluster"``): a handler's limits held by every node
together, through one row of ``wheel_limits`` per handler.

The row holds the handler's ``rate``, ``burst`` and ``concurrency`` and its token bucket:
``tokens`` as of ``stamp``, refilled at ``rate`` per second of the **database's** clock, never
above ``burst``. :func:`claim` is the limited handler's claim (:func:`.firing.attempt`'s
compare-and-set, fenced the same way) in one transaction of three statements:

1. the row is locked, **unless another claim holds it** (``SKIP LOCKED``: a claim never waits
   for another), and a transaction-local setting says so (:data:`_HELD`);
2. an upsert writes this node's limits when its registration is new to the row, or inserts the
   row when it is missing, where that waits for no other claim (the row is held, or missing);
3. one statement counts the handler's running attempts, refills the bucket, claims at most as
   many of the requested rows as the tokens and the free slots allow, in ``(due, version)``
   order, and takes one token per row claimed, **if** this transaction holds the row. A claim
   never starts more than the tokens allow, and never more than ``concurrency`` run at once
   across the cluster: the claims of a handler by every node go one at a time.

All go in one round trip with the transaction's BEGIN and COMMIT (a pipeline). The third runs
after the lock was granted, in a snapshot of its own (READ COMMITTED), so it sees every claim
and outcome committed before. A claim that found the row held claims nothing
(:attr:`LimitedClaim.row_busy`, every due row refused): it returns at once, and the timers of
other handlers claimed beside it (:mod:`wheel_engine.nodes.sink`) never wait behind another
node's claim. Why not ``NOWAIT``: its error would abort the pipeline, and psycopg logs a warning
for every such claim. What counts as **running**: RUNNING rows of the handler
claimed under the current epoch of a partition whose lease is alive. A node that dies holding
slots gives them back when its leases lapse (at most a lease later), before any takeover resets
its rows; tokens are never held by a node (the bucket refills on the database's clock).

A requested row that was due and pending but over the limit is **refused**
(:attr:`LimitedClaim.refused`): not claimed, not charged, still PENDING. The reply says why
(``blocked_on``) and how many tokens are left, so the node knows when the next one is there.

Which limits hold: the row's. A node writes its own at :func:`register` (when it opens, for each
handler registered before) and at its first claim after a (re-)registration, so the node that
registered last wins; the others' claims are checked against the row as well (their own gates
only hold them back further).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, NamedTuple

from psycopg import AsyncConnection

from journal.postgres.firing import CLAIM_RETURNING, CLAIM_SET, MINE, AttemptResult, Claimed
from journal.postgres.rows import arrays
from journal.postgres.schema import DB_NOW
from journal.postgres.states import PENDING_CODE, RUNNING_CODE

__all__ = [
    "READ_LIMITS",
    "BucketRow",
    "ClusterLimits",
    "LimitedClaim",
    "bucket_rows",
    "claim",
    "register",
]

#: The bucket's clock: the statement's start, taken once the row's lock is granted (``now()``,
#: the transaction's start, could lie before the last holder's stamp). Due checks keep DB_NOW.
_BUCKET_NOW: Final = "extract(epoch FROM statement_timestamp())::float8"
#: Slack on a token count (a refill armed for one token may read 0.999999: float seconds).
_SLACK: Final = 1e-6
_NO_LIMIT: Final = 2**31 - 1


def _refilled(burst: str, clock: str) -> str:
    """Row ``l``'s tokens refilled to ``clock`` at its rate, at most ``burst``."""
    return f"least({burst}, l.tokens + greatest(0, {clock} - l.stamp) * l.rate)"


def _running(handler: str) -> str:
    """The count of ``handler``'s running attempts: RUNNING under a live lease's epoch."""
    return (
        "SELECT count(*)::int FROM wheel_timers t JOIN wheel_partitions p"
        "  ON p.partition = t.partition AND p.epoch = t.run_epoch"
        f" WHERE t.handler = {handler} AND t.state = {RUNNING_CODE} AND p.lease_until > {DB_NOW}"
    )


#: Set (for the transaction only) once this claim holds the handler's row: the claim statement
#: asks for it, so it claims nothing unless its snapshot was taken after the lock was granted.
_HELD: Final = "wheel_engine.limit_row_held"
# The row locked unless another claim holds it (then nothing: never a wait behind that claim).
_TRY_LOCK: Final = (
    "WITH locked AS (SELECT l.handler FROM wheel_limits l WHERE l.handler = %(handler)s"
    " FOR UPDATE SKIP LOCKED)"
    f" SELECT set_config('{_HELD}', 'yes', true) FROM locked"
)
_IS_HELD: Final = f"current_setting('{_HELD}', true) = 'yes'"
# A new row starts with a full bucket; new limits on a row keep its tokens, refilled to now
# under the old rate and cut to the new burst.
_COLUMNS: Final = "INSERT INTO wheel_limits AS l (handler, rate, burst, concurrency, tokens, stamp)"
_NEW_ROW: Final = (
    "%(handler)s, %(rate)s::float8, %(burst)s::int, %(concurrency)s::int,"
    f" coalesce(%(burst)s::int, 0), {_BUCKET_NOW}"
)
_ON_CONFLICT: Final = (
    " ON CONFLICT (handler) DO UPDATE SET rate = excluded.rate, burst = excluded.burst,"
    " concurrency = excluded.concurrency,"
    " tokens = CASE WHEN excluded.rate IS NULL THEN 0"
    "   WHEN l.rate IS NULL THEN excluded.burst"
    f"   ELSE {_refilled('excluded.burst', _BUCKET_NOW)}"
    " END,"
    f" stamp = greatest(l.stamp, {_BUCKET_NOW})"
    # Not written unless asked: the conflicting row is locked all the same (ON CONFLICT's rule)
    " WHERE %(write)s::boolean"
)
_REGISTER: Final = f"{_COLUMNS} VALUES ({_NEW_ROW}){_ON_CONFLICT}"
# In a claim, the row is written (a registration new to it) or inserted (it is missing) only
# where that waits for no other claim: this one holds the row, or there is no row yet.
_CLAIM_REGISTER: Final = (
    f"{_COLUMNS} SELECT {_NEW_ROW} WHERE {_IS_HELD}"
    " OR NOT EXISTS (SELECT 1 FROM wheel_limits w WHERE w.handler = %(handler)s)"
    f"{_ON_CONFLICT} RETURNING set_config('{_HELD}', 'yes', true)"
)
_CLAIM: Final = (
    f"{MINE},"
    " ready AS (SELECT m.key, m.version, m.epoch, t.due FROM mine m JOIN wheel_timers t"
    "   ON t.key = m.key AND t.version = m.version"
    f"   WHERE t.state = {PENDING_CODE} AND t.due <= {DB_NOW}),"
    " bucket AS (SELECT l.handler, l.concurrency, l.rate, CASE WHEN l.rate IS NULL THEN NULL"
    f"   ELSE {_refilled('l.burst', _BUCKET_NOW)} END AS level"
    f"   FROM wheel_limits l WHERE l.handler = %(handler)s AND {_IS_HELD}),"
    # Counted only for a concurrency: a rate alone never reads the running rows.
    " busy AS (SELECT CASE WHEN (SELECT b.concurrency FROM bucket b) IS NULL THEN 0"
    f"   ELSE ({_running('%(handler)s')}) END AS n),"
    " room AS (SELECT greatest(0, least("
    f"   coalesce(floor(b.level + {_SLACK})::int, {_NO_LIMIT}),"
    f"   coalesce(b.concurrency - busy.n, {_NO_LIMIT}))) AS n FROM bucket b, busy),"
    " chosen AS (SELECT r.key, r.version, r.epoch AS epoch FROM ready r ORDER BY r.due, r.version"
    "   LIMIT coalesce((SELECT n FROM room), 0)),"
    f" claimed AS ({CLAIM_SET}"
    "   FROM chosen m WHERE t.key = m.key AND t.version = m.version"
    f"   AND t.state = {PENDING_CODE}"
    f"  {CLAIM_RETURNING}),"
    " spent AS (UPDATE wheel_limits l SET stamp = greatest(l.stamp, "
    f"{_BUCKET_NOW}),"
    "   tokens = CASE WHEN b.level IS NULL THEN l.tokens"
    "     ELSE greatest(0, b.level - (SELECT count(*) FROM claimed)) END"
    "   FROM bucket b WHERE l.handler = b.handler RETURNING l.tokens)"
    f" SELECT 'c', key, version, attempts, first_attempt_at, run_epoch, NULL::float8, {DB_NOW}"
    " FROM claimed"
    " UNION ALL"
    f" SELECT 'e', t.key, t.version, NULL, NULL, NULL, t.due, {DB_NOW}"
    " FROM mine m JOIN wheel_timers t ON t.key = m.key AND t.version = m.version"
    f" WHERE t.state = {PENDING_CODE} AND t.due > {DB_NOW}"
    " UNION ALL"
    f" SELECT 'w', r.key, r.version, NULL, NULL, NULL, r.due, {DB_NOW} FROM ready r"
    "   WHERE NOT EXISTS (SELECT 1 FROM chosen c WHERE c.key = r.key)"
    " UNION ALL"
    " SELECT 'b', NULL, NULL, busy.n, s.tokens, b.concurrency, b.rate, NULL FROM busy, bucket b,"
    " spent s"
)
READ_LIMITS: Final = (
    "SELECT l.handler, l.rate, l.burst, l.concurrency,"
    f" CASE WHEN l.rate IS NULL THEN NULL ELSE {_refilled('l.burst', DB_NOW)} END,"
    f" ({_running('l.handler')})"
    " FROM wheel_limits l ORDER BY l.handler"
)


class ClusterLimits(NamedTuple):
    """A handler's limits as a node registered them (None: that limit is not set)."""

    rate: float | None
    burst: int | None
    concurrency: int | None


class LimitedClaim(NamedTuple):
    """What :func:`claim` did for one cluster-limited handler."""

    result: AttemptResult  #: claimed and not-due-yet rows, as :func:`.firing.attempt` says
    refused: list[str]  #: keys due and pending but over the limit: still PENDING, uncharged
    running: int  #: the handler's running attempts across the cluster before this claim
    tokens: float | None  #: the bucket's tokens after this claim (None: no rate)
    rate: float | None  #: the row's limits, the ones the claim was checked against
    concurrency: int | None
    #: another claim of the handler held its row: nothing was claimed or read from the row
    #: (``running``, ``tokens`` and the limits are not the row's), every due row was refused
    row_busy: bool = False

    @property
    def blocked_on(self) -> str | None:
        """What the refused rows wait for: ``"row"`` (another claim's), ``"slot"``,
        ``"token"``, or None (none refused)."""
        if not self.refused:
            return None
        if self.row_busy:
            return "row"
        claimed = len(self.result.claimed)
        if self.concurrency is not None and self.running + claimed >= self.concurrency:
            return "slot"
        return "token"


class BucketRow(NamedTuple):
    """A row of ``wheel_limits`` as ``wheel-engine status`` shows it."""

    handler: str
    rate: float | None
    burst: int | None
    concurrency: int | None
    tokens: float | None  #: refilled to the database's clock now
    running: int  #: RUNNING under a live lease, across the cluster


def _row(handler: str, limits: ClusterLimits) -> dict[str, Any]:
    return {
        "handler": handler,
        "rate": limits.rate,
        "burst": limits.burst,
        "concurrency": limits.concurrency,
    }


async def register(conn: AsyncConnection[Any], limits: dict[str, ClusterLimits]) -> None:
    """Write this node's ``limits`` (by handler) to their rows: the last writer's hold."""
    for handler, wanted in sorted(limits.items()):  # in one order: no deadlock between nodes
        await conn.execute(_REGISTER, {**_row(handler, wanted), "write": True})


async def claim(
    conn: AsyncConnection[Any],
    node: str,
    handler: str,
    limits: ClusterLimits,
    requests: Sequence[tuple[str, int, int, int]],
    *,
    write: bool,
) -> LimitedClaim:
    """Claim ``(key, version, partition, epoch)`` requests of cluster-limited ``handler``
    within its row's limits (see the module docstring). ``write``: this node's ``limits`` go to
    the row first (a registration it has not written yet); a missing row is written anyway."""
    params = arrays(requests, ("keys", "versions", "parts", "epochs"), node=node, write=write)
    params.update(_row(handler, limits))
    # One round trip: BEGIN, the row locked unless another claim holds it (inserted if missing,
    # written if asked), the claim, COMMIT.
    async with conn.pipeline(), conn.transaction():
        await conn.execute(_TRY_LOCK, params)
        await conn.execute(_CLAIM_REGISTER, params)
        cur = await conn.execute(_CLAIM, params)
    rows = await cur.fetchall()
    claimed: list[Claimed] = []
    early: list[tuple[str, float]] = []
    refused: list[str] = []
    db_now: float | None = None
    running, tokens, concurrency, rate = 0, None, limits.concurrency, limits.rate
    row_busy = True  # unless the row's own line (``'b'``) says otherwise
    for kind, key, version, attempts, first_at, epoch, due, now in rows:
        if kind == "b":
            running, concurrency, rate = attempts, epoch, due
            tokens = None if rate is None else first_at
            row_busy = False
            continue
        db_now = now
        if kind == "c":
            claimed.append(Claimed(key, version, attempts, first_at, epoch))
        elif kind == "e":
            early.append((key, due))
        else:
            refused.append(key)
    result = AttemptResult(claimed, early, db_now)
    return LimitedClaim(result, refused, running, tokens, rate, concurrency, row_busy)


def bucket_rows(rows: Sequence[Sequence[Any]]) -> list[BucketRow]:
    """:data:`READ_LIMITS`' rows (the CLI runs it on its own synchronous connection)."""
    return [
        BucketRow(h, rate, burst, conc, None if tokens is None else float(tokens), int(running))
        for h, rate, burst, conc, tokens, running in rows
    ]
