"""The change feed: how an owner learns of timers changed in its partitions by any node.

Every write stamps its row with ``change_seq`` (the order of changes) and ``change_xid`` (the
writing transaction, see :mod:`journal.postgres.schema`). A sequence alone cannot be a cursor:
a transaction holding a lower ``change_seq`` may commit after a higher one was read, and would
be skipped. So :class:`ChangeFeed` keeps as its cursor the oldest transaction still running
when it last read (``pg_snapshot_xmin``): every transaction older than that had ended, and its
rows were visible then; rows of younger ones are read again next time. Guaranteed: every
committed change of a held partition is delivered at least once, in ``change_seq`` order within
one :meth:`ChangeFeed.read`. Not guaranteed: only once. A row may come again (while a
transaction that began before its change is still open), so consumers go by version. A session
left idle in a transaction holds the cursor back; the re-read rows grow meanwhile.

:class:`Listener` holds one separate connection in LISTEN: a NOTIFY only wakes the owner early.
Nothing depends on it; without it, the owner reads the feed every ``poll`` seconds anyway.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from typing import Any, Final

import psycopg
from psycopg import AsyncConnection

from journal.postgres.leases import RELEASED
from journal.postgres.rows import COLUMNS, StoredTimer, stored
from journal.postgres.schema import NOTIFY_CHANNEL
from journal.postgres.target import Target

__all__ = ["PAGE", "ChangeFeed", "Listener"]

logger = logging.getLogger(__name__)

#: Rows per page of a feed read.
PAGE: Final = 1_000
#: Seconds before the listener tries again after its connection failed.
_RECONNECT_DELAY: Final = 1.0

_XMIN: Final = "SELECT pg_snapshot_xmin(pg_current_snapshot())::text"
_CHANGES: Final = (
    f"SELECT {COLUMNS} FROM wheel_timers t"
    " WHERE t.change_xid >= %(cursor)s::xid8 AND t.partition = ANY(%(parts)s::int[])"
    " AND t.change_seq > %(after)s ORDER BY t.change_seq LIMIT %(limit)s"
)


class ChangeFeed:
    """A cursor over the changes of the held partitions (see the module doc)."""

    __slots__ = ("cursor",)

    def __init__(self) -> None:
        #: Transactions from this one on may have changes not yet read ("0": none read yet).
        self.cursor = "0"

    async def start(self, conn: AsyncConnection[Any]) -> None:
        """Set the cursor to now: changes from here on will be read. Call before loading."""
        self.cursor = await _xmin(conn)

    async def read(
        self, conn: AsyncConnection[Any], partitions: Sequence[int]
    ) -> list[StoredTimer]:
        """The rows of ``partitions`` changed since the last read (see the module doc)."""
        if not partitions:
            return []
        cursor = await _xmin(conn)  # before the rows: see the module doc
        params: dict[str, Any] = {"cursor": self.cursor, "parts": list(partitions)}
        changed: list[StoredTimer] = []
        after = 0
        while True:
            params.update(after=after, limit=PAGE)
            page = [stored(r) for r in await (await conn.execute(_CHANGES, params)).fetchall()]
            changed += page
            if len(page) < PAGE:
                break
            after = page[-1].change_seq
        self.cursor = cursor
        return changed


async def _xmin(conn: AsyncConnection[Any]) -> str:
    row = await (await conn.execute(_XMIN)).fetchone()
    assert row is not None  # a bare SELECT always returns its one row
    return str(row[0])


class Listener:
    """LISTEN on a connection of its own; :meth:`wait` returns early on a NOTIFY.

    ``woken`` collects the partitions named since the last :meth:`wait`; ``released`` is set
    when a node freed partitions (a reason to run the lease round now).
    """

    def __init__(self, target: Target) -> None:
        self._target = target
        self._event = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.woken: set[int] = set()
        self.released = False
        #: Called when the connection is back after it was lost (the server is reachable
        #: again): the store renews its pool then (see ``PostgresStore``).
        self.reconnected: Callable[[], None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="pg-listen")

    async def wait(self, timeout: float) -> bool:
        """Sleep up to ``timeout`` seconds; True if a NOTIFY came (then clears it).

        ``asyncio.wait``, not ``wait_for``: on Python 3.11 a ``wait_for`` cancelled just as its
        timeout or event fires can leave its caller cancelling forever (an engine's close hung
        on it); ``asyncio.wait`` never holds back a cancellation."""
        waiter = asyncio.ensure_future(self._event.wait())
        try:
            await asyncio.wait({waiter}, timeout=timeout)
        finally:
            waiter.cancel()
        woke = self._event.is_set()
        self._event.clear()
        return woke

    def _notified(self, payload: str) -> None:
        if payload == RELEASED:
            self.released = True
        elif payload.isdigit():
            self.woken.add(int(payload))
        self._event.set()

    async def _run(self) -> None:
        listened = False  # a connection listened before: the next one is a reconnection
        while True:
            try:
                conn = await AsyncConnection.connect(
                    self._target.url,
                    autocommit=True,
                    prepare_threshold=None,
                    **self._target.kwargs(),
                )
                async with conn:
                    await conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
                    self._event.set()  # anything sent while not listening: look now
                    if listened:  # back after an outage: a lease round now, on a new pool
                        self.released = True
                        if self.reconnected is not None:
                            self.reconnected()
                    listened = True
                    async for notify in conn.notifies():
                        self._notified(notify.payload)
            except psycopg.Error as exc:
                text = self._target.scrub(str(exc).strip())
                logger.warning("LISTEN connection failed (%s); polling meanwhile", text)
            await asyncio.sleep(_RECONNECT_DELAY)

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
