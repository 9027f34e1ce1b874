"""In-process crash tools for the crash tests, using the journal's internals from the test side.

- :func:`freeze_writer`: from now on nothing the engine submits is committed (the group-commit
  writer stops waking up) until the returned ``thaw()`` is awaited. Together with :func:`crash`
  it makes "crash with these records not yet committed" deterministic.
- :func:`crash`: abandon an engine as a SIGKILL would: no ``close()``, nothing queued is flushed,
  its tasks are cancelled, the SQLite connection is closed (an open transaction rolls back) and
  the journal's lock is released. What was committed stays; nothing else does.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from wheel_engine import Engine


def _writer(engine: Engine) -> Any:
    assert engine.journal is not None, "a durable engine is needed"
    writer = engine.journal._writer
    assert writer is not None
    return writer


def freeze_writer(engine: Engine) -> Callable[[], Awaitable[None]]:
    """Stop committing. Call only when the writer is idle (after a settled clock step).

    The writer task waits on its ``_wake`` event; replacing that event with a fresh one means
    ``submit`` wakes nobody, so submitted records stay queued (not committed) and their futures
    pending. The engine is detached from its virtual clock, so that ``advance`` does not wait
    for commits that will not come.
    """
    writer = _writer(engine)
    assert not writer.busy(), "freeze only an idle writer"
    asleep_on = writer._wake
    writer._wake = asyncio.Event()
    engine.clock.detach(engine)

    async def thaw() -> None:
        queued = writer._wake.is_set()
        writer._wake = asleep_on
        if queued:
            asleep_on.set()
        engine.clock.attach(engine)
        settle = getattr(engine.clock, "settle", None)  # a VirtualClock's
        if settle is not None:
            await settle()
        await engine.quiesce()

    return thaw


async def crash(engine: Engine, others: Iterable[asyncio.Future[Any]] = ()) -> None:
    """Abandon ``engine`` without closing it, dropping every record not yet committed.

    ``others``: the caller's own tasks (e.g. a ``schedule`` still waiting for its commit) that
    die with the "process".
    """
    engine._stop()  # its callbacks do nothing from now on
    engine.clock.detach(engine)
    journal = engine.journal
    tasks: list[asyncio.Future[Any]] = [*others, *engine._pool.tasks, *engine._background]
    if engine._commits.compacting is not None:
        tasks.append(engine._commits.compacting)
    if journal is not None and journal._writer is not None:
        writer = journal._writer
        # Lost with the process: queued records, and whoever waits for them (never resolved).
        writer._kinds, writer._bodies, writer._waiters = [], [], []
        writer._jobs.clear()
        tasks.append(writer._task)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for future in list(engine._pool.threads):
        with contextlib.suppress(BaseException):
            await future
    if journal is not None:
        journal._closed = True
        if journal._conn is not None:
            await journal._conn.close()  # an uncommitted transaction is rolled back
        if journal._lock is not None:
            journal._lock.release()
