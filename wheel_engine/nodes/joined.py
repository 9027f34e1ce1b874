"""A node's schedules and cancels written in the caller's own transaction (``connection=``).

:class:`JoinedWrites` is :class:`~wheel_engine.nodes.scheduler.NodeScheduler`'s twin for a
connection the application holds: the same requests (validated by the same checker, keys made
by the same scheduler), written by the store's :attr:`~journal.postgres.PostgresStore.
in_transaction` with the same SQL, and the same results, but as a promise: every
:class:`TimerInfo` it returns is a :class:`~wheel_engine.model.ProvisionalTimerInfo`
(``committed`` False), and a cancel's result is what the caller's commit makes true.

Nothing changes in this node's memory and no event is emitted, since the node cannot know
whether (or when) the caller commits: the timer goes into its owner's wheel once the commit
makes it visible, through the change feed that every owner reads (woken by the ``NOTIFY`` that
the commit delivers), exactly as a timer scheduled by another node does. A timer the caller's
transaction cancels or replaces stays locked by that transaction until it ends, so no node can
claim the old version meanwhile; after a commit the claim is refused, after a rollback it goes
ahead as if nothing happened.
"""

from __future__ import annotations

from typing import Any

from journal.postgres import LiveKeyConflict, PostgresStore
from wheel_engine.errors import DuplicateKey
from wheel_engine.model import CancelResult, ProvisionalTimerInfo, TimerInfo
from wheel_engine.nodes.scheduler import NodeScheduler, info_of
from wheel_engine.validation import CheckedRequest

__all__ = ["JoinedWrites"]


class JoinedWrites:
    """This node's writes in callers' transactions (see the module docstring)."""

    __slots__ = ("_scheduler", "_store")

    def __init__(self, scheduler: NodeScheduler, store: PostgresStore) -> None:
        self._scheduler = scheduler
        self._store = store

    async def schedule_many(self, conn: Any, requests: list[CheckedRequest]) -> list[TimerInfo]:
        """Write validated ``requests`` in ``conn``'s transaction, all or none.

        Raises ``DuplicateKey`` for an ``on_conflict="error"`` request that meets a live timer
        (nothing of the batch is written: its savepoint is rolled back, the caller's
        transaction goes on), ``UnusableConnection`` for a connection that cannot be used."""
        asked = self._scheduler.store_requests(requests)
        try:
            results = await self._store.in_transaction.schedule_many(conn, asked)
        except LiveKeyConflict as exc:
            raise DuplicateKey(str(exc)) from exc
        infos: list[TimerInfo] = []
        for request, (row, kept) in zip(requests, results, strict=True):
            info = info_of(row) if kept else info_of(row, request.payload, decoded=True)
            infos.append(ProvisionalTimerInfo(*info))
        return infos

    async def cancel(self, conn: Any, key: str, version: int | None) -> CancelResult:
        """Cancel ``key`` in ``conn``'s transaction; the result is what its commit makes true
        (``CANCELED``: it will not fire; on rollback the timer stays as it was)."""
        return CancelResult(await self._store.in_transaction.cancel(conn, key, version))
