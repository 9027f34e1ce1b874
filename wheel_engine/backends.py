"""Where the engine's timers are kept, chosen once when the engine is built.

:class:`Backend` is what :class:`~wheel_engine.engine.Engine` asks of its storage at the edges
of its life: open it (recovering what it holds) and get the :class:`~wheel_engine.storage.
Storage` the public calls go through, stop its background work before the commit path closes,
and report its own figures. Three implementations: :class:`MemoryBackend` (nothing to open or
recover), :class:`SqliteBackend` (the journal file, recovered into the timer table) and
:class:`NodeBackend` (a node on a shared PostgreSQL database, :mod:`wheel_engine.nodes`).
:func:`backend_for` picks one from the engine's ``path``; the engine holds no mode flag of its
own. The firing path's records go through :class:`~wheel_engine.storage.RecordSink`, which the
backend's open installs in :class:`~wheel_engine.commits.Commits` (the journal on SQLite, the
node's sink on PostgreSQL); in memory the commits keep :data:`~wheel_engine.storage.NULL_SINK`,
whose every commit is done at once, so the core holds no mode flag: where it takes a fast path
it asks the commits (``Commits.instant``, set with the sink).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias

if TYPE_CHECKING:
    from journal import Journal
    from wheel_engine.clock import Clock
    from wheel_engine.commits import Commits
    from wheel_engine.dispatcher import Dispatcher
    from wheel_engine.events import EventBus
    from wheel_engine.local_storage import LocalStorage
    from wheel_engine.nodes.node import Node
    from wheel_engine.stats import Counters
    from wheel_engine.storage import Storage
    from wheel_engine.timers import TimerTable
    from wheel_engine.trigger import Trigger
    from wheel_engine.validation import RequestChecker

__all__ = ["Backend", "MemoryBackend", "NodeBackend", "SqliteBackend", "backend_for"]


class Backend(Protocol):
    """The engine's storage, as the engine's lifecycle sees it.

    ``shared``: the store, not this engine's memory, decides versions and ``on_conflict``
    (several nodes share it), so ``schedule()`` always waits for it."""

    @property
    def shared(self) -> bool: ...

    async def open(self, clock: Clock) -> Storage:
        """Open and recover into the timer table; returns what the public calls go through."""
        ...

    async def stop(self) -> None:
        """End background work (before the commit path flushes and closes the store)."""
        ...

    def journal(self) -> Journal | None:
        """The open SQLite journal, if that is the store."""
        ...

    def stats(self) -> dict[str, Any]:
        """Figures of its own for ``Engine.stats()`` (none but on PostgreSQL)."""
        ...


class MemoryBackend:
    """Nothing to open, recover or stop: the timers live in this process only."""

    shared = False

    def __init__(self, local: LocalStorage) -> None:
        self._local = local

    async def open(self, clock: Clock) -> Storage:
        return self._local

    async def stop(self) -> None:
        return None

    def journal(self) -> Journal | None:
        return None

    def stats(self) -> dict[str, Any]:
        return {}


class SqliteBackend(MemoryBackend):
    """The SQLite journal at ``path``: opened, recovered into the table, then written to."""

    def __init__(
        self,
        local: LocalStorage,
        path: str,
        durability: Literal["full", "normal"],
    ) -> None:
        super().__init__(local)
        self._path = path
        self._durability = durability
        self._journal: Journal | None = None  # once open

    async def open(self, clock: Clock) -> Storage:
        self._journal = await self._local.open(self._path, self._durability, clock)
        return self._local

    def journal(self) -> Journal | None:
        return self._journal


#: The engine's parts a node works with (see ``Node.open``).
NodeParts: TypeAlias = (
    "tuple[TimerTable, Trigger, Dispatcher, Commits, Counters, RequestChecker, EventBus]"
)


class NodeBackend:
    """A node on a shared PostgreSQL database (:class:`~wheel_engine.nodes.node.Node`)."""

    shared = True

    def __init__(self, node: Node, parts: NodeParts) -> None:
        self._node = node
        self._parts = parts
        parts[5].leave_conflicts_to_the_store()  # the database decides, not this node's memory

    async def open(self, clock: Clock) -> Storage:
        table, trigger, dispatcher, commits, stats, check, events = self._parts
        parts = (table, trigger, dispatcher.pool, commits, stats, check)
        return await self._node.open(*parts, clock, events, dispatcher.limits)

    async def stop(self) -> None:
        await self._node.stop()  # the loops; closing the journal releases the partitions

    def journal(self) -> Journal | None:
        return None

    def stats(self) -> dict[str, Any]:
        return self._node.stats()


def backend_for(
    path: str | None,
    durability: Literal["full", "normal"],
    node: Node | None,
    local: LocalStorage,
    parts: NodeParts,
) -> Backend:
    """The backend for an engine's ``path``: ``node`` for a PostgreSQL URL (built by
    :func:`wheel_engine.nodes.options.node_for`), a journal file, or memory (no path)."""
    if node is not None:
        return NodeBackend(node, parts)
    if path is not None:
        return SqliteBackend(local, path, durability)
    return MemoryBackend(local)
