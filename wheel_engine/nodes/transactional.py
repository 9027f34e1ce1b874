"""``schedule``, ``schedule_many`` and ``cancel`` with ``connection=``: the engine's way in.

``Engine`` hands the keyword straight here. Each call checks, before anything is written,
in this order: that the engine runs on PostgreSQL (``ValueError`` otherwise: in memory or on
SQLite there is no database to share a transaction with), that it takes work
(``EngineError``), the request itself (the same checks and errors as without a connection),
then the connection (:func:`journal.postgres.in_transaction.check_usable`); then it writes
through the node's :class:`~wheel_engine.nodes.joined.JoinedWrites`.

Stdlib only, like :mod:`.options`: an engine on a SQLite file imports this and never psycopg.
``docs/guide/several-nodes.md`` ("Scheduling in your own transaction") is the user's guide.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final

from wheel_engine.model import CancelResult, TimerInfo
from wheel_engine.validation import check_key, check_version

if TYPE_CHECKING:
    from wheel_engine.front import Front
    from wheel_engine.nodes.joined import JoinedWrites
    from wheel_engine.nodes.node import Node

__all__ = ["NEEDS_POSTGRES", "Joined"]

NEEDS_POSTGRES: Final = (
    "connection= needs a postgresql:// URL as the journal: the timer is written in that"
    " connection's transaction, so it must live in the same database"
)


class Joined:
    """The engine's three calls with ``connection=`` (see the module docstring). ``node`` is
    None for an engine without PostgreSQL: every call then raises ``ValueError``."""

    __slots__ = ("_front", "_node")

    def __init__(self, node: Node | None, front: Front) -> None:
        self._node = node
        self._front = front

    def _writes(self) -> JoinedWrites:
        if self._node is None:
            raise ValueError(NEEDS_POSTGRES)
        self._front.check_open()
        writes = self._node.transactions
        assert writes is not None  # set by Node.open, before the engine takes work
        return writes

    async def schedule(
        self,
        connection: object,
        handler: Any,
        at: Any,
        delay: Any,
        payload: Any,
        key: Any,
        on_conflict: Any,
    ) -> TimerInfo:
        """``Engine.schedule(..., connection=connection)``: the provisional timer."""
        writes = self._writes()
        front = self._front
        request = front.check.request(handler, at, delay, payload, key, on_conflict, front.now())
        return (await writes.schedule_many(connection, [request]))[0]

    async def schedule_many(
        self, connection: object, requests: Iterable[Mapping[str, Any]]
    ) -> list[TimerInfo]:
        """``Engine.schedule_many(requests, connection=connection)``: one savepoint, all or
        none."""
        writes = self._writes()
        if not isinstance(requests, list | tuple):
            requests = list(requests)
        return await writes.schedule_many(
            connection, self._front.check.batch(requests, self._front.now())
        )

    async def cancel(self, connection: object, key: Any, version: Any) -> CancelResult:
        """``Engine.cancel(key, version=version, connection=connection)``: what the commit
        makes true."""
        writes = self._writes()
        key = check_key(key)
        check_version(version)
        return await writes.cancel(connection, key, version)
