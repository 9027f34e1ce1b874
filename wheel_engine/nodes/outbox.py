"""Outcomes of claimed attempts, written to PostgreSQL in batches, retried through outages.

``Ack``, ``Cancel``, ``Retry`` and ``Dead`` of claimed attempts are written together: the
outcomes submitted while one :meth:`~journal.postgres.PostgresStore.finish` is in flight (or in
the same loop iteration) wait in the outbox and become the next single statement, so a burst
costs one round trip per batch, not one per ack. Each is fenced by key, version, state, epoch
and attempt; a refused one (another node owns the outcome now, or a takeover put the row back
to PENDING) takes the timer out of the table and reads its row again, so that a row put back
in a partition this node holds again is not forgotten. A ``Dead`` with no claim (its last
attempt was interrupted, on this node or a dead one) is
:meth:`~journal.postgres.PostgresStore.give_up`.

An outcome whose statement failed (the database unreachable) is **retried**, with backoff,
until it is written or refused, or until its claim's epoch is over for good
(``Leases.lapsed``: this node holds the partition under another epoch or not at all, or the
lease has lapsed in the database). In that last case whoever takes the partition next returns
the row to PENDING and it runs again: at least once holds, and the retries of a node cut off
from its database end within a lease. The claim stays in ``epochs`` until then, so the
partition is not released while its outcome is on its way, and the reconcile
(:mod:`wheel_engine.nodes.rereading`) leaves the row alone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Final

from journal import Ack, Cancel, Dead, Record, Retry
from journal.errors import JournalError
from journal.postgres import Outcome, PostgresStore, StoreUnavailable
from journal.state import CANCELED, DEAD, PENDING, SUCCEEDED
from wheel_engine.nodes.adopting import Adopter
from wheel_engine.timers import TimerTable

__all__ = ["Claim", "Outbox"]

logger = logging.getLogger(__name__)

#: Seconds before the first retry of a failed outcome write; it doubles up to the cap.
RETRY_FIRST: Final = 0.1
RETRY_CAP: Final = 1.0

#: key -> (version, epoch, attempt) of an attempt claimed here whose outcome is not written.
Claim = tuple[int, int, int]


class Outbox:
    """The outcome writer (see the module docstring). ``epochs`` is the sink's; ``reread``
    reads a key again; ``failed`` is told when a write could not reach the database."""

    def __init__(
        self,
        store: PostgresStore,
        adopter: Adopter,
        table: TimerTable,
        epochs: dict[str, Claim],
        reread: Callable[[str], None],
        failed: Callable[[], None],
    ) -> None:
        self._store = store
        self._adopter = adopter
        self._table = table
        self._epochs = epochs
        self._reread = reread
        self._failed = failed
        self._records: list[Record] = []
        self._waiters: list[asyncio.Future[None]] = []
        self._writing = False  # a task is writing (one statement in flight)
        self.retried = 0  #: outcome writes tried again after a failure
        self.abandoned = 0  #: outcomes given up: their epoch was over (the row runs again)

    def queue(self, records: list[Record]) -> tuple[asyncio.Future[None], bool]:
        """Add ``records``; the future is done once they are written (or given up). True:
        the caller must run :meth:`write` in a task (none is writing)."""
        self._records.extend(records)
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        start = not self._writing
        self._writing = True
        return waiter, start

    async def write(self) -> None:
        """Write the outbox, one statement at a time, until it stays empty."""
        delay = RETRY_FIRST
        try:
            while self._records:
                records, waiters = self._records, self._waiters
                self._records, self._waiters = [], []
                try:
                    again = await self._finish(records)
                except BaseException:
                    for waiter in waiters:
                        waiter.cancel()
                    raise
                if again:  # back in front of what came meanwhile, after a pause
                    self.retried += len(again)
                    self._records[:0] = again
                    self._waiters[:0] = waiters
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, RETRY_CAP)
                    continue
                delay = RETRY_FIRST
                for waiter in waiters:
                    if not waiter.done():
                        waiter.set_result(None)
        finally:
            self._writing = False
            for waiter in self._waiters:  # cancelled with more waiting
                waiter.cancel()
            self._records, self._waiters = [], []

    async def _finish(self, records: list[Record]) -> list[Record]:
        """One statement for ``records`` (and one give-up); returns those to try again."""
        outcomes: list[Outcome] = []
        claimed: list[Record] = []
        orphans: list[Dead] = []
        for record in records:
            claim = self._epochs.get(record.key)
            if claim is not None and claim[0] == record.version:
                outcomes.append(_outcome(record, claim))
                claimed.append(record)
            elif isinstance(record, Dead):
                orphans.append(record)
            # else: not claimed here, nothing of ours to record
        again: list[Record] = []
        if outcomes:
            try:
                accepted = await self._store.finish(outcomes)
            except JournalError as exc:
                self._failed()
                if isinstance(exc, StoreUnavailable) and exc.transient:
                    again = self._keep_trying(claimed, outcomes, exc)
                else:  # it would fail again (or the store is closed): it must not hold back
                    # the outcomes behind it; the row is reconciled after (runs again)
                    self._give_up(claimed, outcomes, exc)
            else:
                self._written(outcomes, accepted)
        if orphans:
            try:
                await self._store.give_up([(r.key, r.version, r.error) for r in orphans])
            except JournalError as exc:  # PENDING still: it is attempted (and given up) again
                logger.warning("could not give up %d timer(s): %s", len(orphans), exc)
        return again

    def _keep_trying(
        self, records: list[Record], outcomes: list[Outcome], exc: JournalError
    ) -> list[Record]:
        """The records of a failed statement still worth writing; the others are given up."""
        lapsed = self._store.leases.lapsed
        partition_of = self._store.partition_of
        again: list[Record] = []
        for record, outcome in zip(records, outcomes, strict=True):
            if lapsed(partition_of(outcome.key), outcome.epoch):
                self._settle(outcome)
                self.abandoned += 1
            else:
                again.append(record)
        logger.warning(
            "could not write %d outcome(s) (timer %s, ...): %s; %d retried, the others run"
            " again after their partition's takeover",
            len(records),
            records[0].key,
            exc,
            len(again),
        )
        return again

    def _give_up(self, records: list[Record], outcomes: list[Outcome], exc: JournalError) -> None:
        for outcome in outcomes:
            self._settle(outcome)
        self.abandoned += len(outcomes)
        logger.error(
            "could not write %d outcome(s) (timer %s, ...), not retried: %s",
            len(records),
            records[0].key,
            exc,
        )

    def _written(self, outcomes: list[Outcome], accepted: set[str]) -> None:
        refused = 0
        for outcome in outcomes:
            self._settle(outcome)
            timer = self._table.timers.get(outcome.key)
            if outcome.key in accepted:
                if timer is None and outcome.state is PENDING:
                    self._reread(outcome.key)  # its retry left the wheel meanwhile: bring it
                continue
            refused += 1
            # Another node owns it now, or a takeover put it back to PENDING (this node's own,
            # after its lease lapsed): whatever the table holds is stale; read it again.
            if timer is not None and timer.version == outcome.version:
                self._adopter.forget_version(outcome.key, outcome.version)
            if self._store.partition_of(outcome.key) in self._store.leases.owned:
                self._reread(outcome.key)
        if refused:
            logger.info("%d outcome(s) refused: their partition changed hands", refused)

    def _settle(self, outcome: Outcome) -> None:
        """The claim of ``outcome`` is done with: it leaves ``epochs`` (unless a newer one of
        the same key took its place)."""
        claim = self._epochs.get(outcome.key)
        if claim is not None and claim[:2] == (outcome.version, outcome.epoch):
            del self._epochs[outcome.key]


def _outcome(record: Record, claim: Claim) -> Outcome:
    _, epoch, attempt = claim
    if isinstance(record, Ack):
        return Outcome(record.key, record.version, epoch, SUCCEEDED, attempt=attempt)
    if isinstance(record, Cancel):
        return Outcome(record.key, record.version, epoch, CANCELED, attempt=attempt)
    if isinstance(record, Retry):
        error, due = record.error, record.due
        return Outcome(record.key, record.version, epoch, PENDING, error, due, attempt)
    assert isinstance(record, Dead), record
    return Outcome(record.key, record.version, epoch, DEAD, record.error, attempt=attempt)
