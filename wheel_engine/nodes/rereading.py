"""Reading rows again that the node may have lost track of, and reconciling its RUNNING rows.

Two repairs after a fault, both read from the database (the authority) and applied through the
:class:`~wheel_engine.nodes.adopting.Adopter`, which goes by version:

- :meth:`Rereader.reread`: a timer whose attempt claimed nothing (its statement ran after the
  lease had lapsed in the database, say, or the claim was dropped because its lease was no
  longer usable when the reply came) left the wheel, but its row may still be PENDING in a
  partition this node holds. It is read again, and goes back into the wheel if so. Reads are
  batched (one statement for every key asked meanwhile) and retried while the database cannot
  be reached.
- :meth:`Rereader.reconcile`, after the node could not reach the database (a lease round or a
  write failed): rows RUNNING under an epoch this node still holds whose handler no longer runs
  here (their outcome, or the give-back of an attempt, was lost) go back to PENDING with their
  attempts kept (CANCELED if a cancel was requested), as a takeover would do, and into the
  wheel. Without it they would stay RUNNING until the partition changed hands. Rows whose claim
  or outcome is in flight here are left alone (``in_flight``), and the statement is fenced by
  the attempts count read, so a claim made after the read is never undone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Final

from journal.errors import JournalError
from journal.postgres import PostgresStore
from wheel_engine.nodes.adopting import Adopter

__all__ = ["REREAD_RETRY", "Rereader"]

logger = logging.getLogger(__name__)

#: Seconds between tries of a re-read while the database cannot be reached.
REREAD_RETRY: Final = 0.5


class Rereader:
    """See the module docstring. ``in_flight(key)``: a claim or outcome of ``key`` is on its
    way here (reconcile leaves its row alone)."""

    def __init__(
        self, store: PostgresStore, adopter: Adopter, in_flight: Callable[[str], bool]
    ) -> None:
        self._store = store
        self._adopter = adopter
        self._in_flight = in_flight
        self._keys: set[str] = set()
        self._task: asyncio.Task[None] | None = None
        self.reread = 0  #: keys read again
        self.requeued = 0  #: RUNNING rows without a handler here put back to PENDING

    def ask(self, key: str) -> None:
        """Read ``key`` again soon (batched with the others asked meanwhile)."""
        self._keys.add(key)
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        try:
            while self._keys:
                await asyncio.sleep(0)  # the keys asked in this loop turn share the read
                keys, self._keys = sorted(self._keys), set()
                try:
                    rows = await self._store.lookup_many(keys)
                except JournalError as exc:
                    self._keys.update(keys)
                    logger.warning("could not read %d timer(s) again: %s", len(keys), exc)
                    await asyncio.sleep(REREAD_RETRY)
                    continue
                self.reread += len(keys)
                self._adopter.rows(rows)
        finally:
            self._task = None

    async def reconcile(self) -> int:
        """Put back to PENDING the rows RUNNING here without a handler (see the module doc);
        returns how many. Raises ``JournalError`` if the database cannot be reached."""
        store = self._store
        held = [(p, lease.epoch) for p, lease in store.leases.owned.items()]
        running = await store.running_at(held)
        epochs = dict(held)
        orphans = [
            (key, version, epochs[store.partition_of(key)], attempts)
            for key, version, attempts in running
            if not self._in_flight(key)
        ]
        if not orphans:
            return 0
        rows = await store.requeue(orphans)
        self.requeued += len(rows)
        for row in rows:  # what the table holds of them is stale: the rows are the truth
            self._adopter.forget_version(row.key, row.version)
        self._adopter.rows(rows)
        logger.warning(
            "node %s: %d timer(s) left RUNNING without a handler here are PENDING again",
            store.node,
            len(rows),
        )
        return len(rows)

    async def close(self) -> None:
        task, self._task = self._task, None
        self._keys.clear()
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
