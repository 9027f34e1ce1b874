"""The SQLite (and in-memory) side of :class:`wheel_engine.storage.Storage`: the engine's own
scheduler and commit path."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from wheel_engine.gcpause import BULK, gc_paused
from wheel_engine.model import CancelResult, TimerInfo

if TYPE_CHECKING:
    from journal import Journal
    from wheel_engine.clock import Clock
    from wheel_engine.commits import Commits
    from wheel_engine.scheduling import Scheduler
    from wheel_engine.timers import TimerTable
    from wheel_engine.validation import CheckedRequest, RequestChecker

__all__ = ["LocalStorage"]


class LocalStorage:
    """:class:`~wheel_engine.storage.Storage` over the SQLite journal (or none: in memory)
    through the engine's own scheduler and commit path: memory first, then committed, undone on
    failure."""

    __slots__ = ("_check", "_commits", "_scheduler", "_table")

    def __init__(
        self, scheduler: Scheduler, commits: Commits, table: TimerTable, check: RequestChecker
    ) -> None:
        self._scheduler = scheduler
        self._check = check
        self._commits = commits
        self._table = table

    async def open(self, path: str, durability: Literal["full", "normal"], clock: Clock) -> Journal:
        """Open and recover the journal at ``path`` into the table; returns the journal."""
        # Recovery and restore: every object they make stays alive, for long.
        with gc_paused(BULK, keep=True):
            journal, recovered = await self._commits.open(path, durability)
            self._scheduler.next_version = recovered.max_version + 1
            self._table.restore(recovered, clock.time(), path)
        return journal

    async def schedule(self, request: CheckedRequest) -> TimerInfo:
        info, commit = self._scheduler.schedule_one(request)  # commit: None in memory
        return info if commit is None else await commit

    async def schedule_many(
        self, requests: Iterable[Mapping[str, Any]], now: float
    ) -> list[TimerInfo]:
        infos, commit = self._scheduler.schedule_many(self._check, requests, now)
        if commit is not None:
            await commit
        return infos

    async def cancel(self, key: str, version: int | None) -> CancelResult:
        return await self._scheduler.cancel(key, version)

    async def redrive(self, key: str, due: float, now: float) -> TimerInfo:
        return await self._scheduler.redrive(key, due, now)

    async def lookup(self, key: str, now: float) -> TimerInfo | None:
        """One engine alone holds every timer of its journal: memory is the answer."""
        return self._table.info(key, now)
