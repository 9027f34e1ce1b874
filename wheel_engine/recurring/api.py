"""``Engine``'s recurring calls, kept here so the engine's module stays a list of delegations.

:class:`RecurringCalls` is a base of :class:`~wheel_engine.engine.Engine`; its methods check
that the engine is open and hand over to :class:`~wheel_engine.recurring.series.Series`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, Protocol, cast

from wheel_engine.recurring.listing import recurrences
from wheel_engine.recurring.records import RecurrenceInfo
from wheel_engine.recurring.series import EngineLike, Series
from wheel_engine.validation import check_version

__all__ = ["RecurringCalls"]


class _Front(Protocol):
    def check_open(self) -> None: ...


class _Engine(Protocol):
    @property
    def _front(self) -> _Front: ...


class RecurringCalls:
    """``schedule_recurring``, ``cancel_recurring`` and ``recurrences`` (SPEC, "Recurring")."""

    _series: Series

    def _check_open(self) -> None:
        """The engine's check: raises unless it is started and not closing."""
        cast("_Engine", self)._front.check_open()

    def _install_series(self) -> Series:
        """The engine's :class:`Series`, its record handler registered (in ``__init__``)."""
        series = Series(cast("EngineLike", self))
        series.install()
        return series

    async def schedule_recurring(
        self,
        name: str,
        handler: str,
        *,
        cron: str | None = None,
        every: float | None = None,
        tz: str = "UTC",
        payload: Any = None,
        catch_up: Literal["latest", "all", "skip"] = "latest",
        overlap: bool = False,
        start: datetime | float | None = None,
    ) -> RecurrenceInfo:
        """Schedule (or replace) the recurrence ``name`` of the registered ``handler``.

        Exactly one of ``cron`` (five fields, evaluated in the IANA zone ``tz``) and ``every``
        (seconds > 0, counted from the previous nominal time: no drift). Each occurrence is a
        timer keyed ``f"{name}@{nominal UTC time, ISO 8601}Z"``, run under the handler
        ``recurring:<handler>`` with ``payload``. The record and the first occurrence are
        committed before this returns; scheduling ``name`` again replaces the rule (its pending
        occurrence is replaced, a running one finishes). ``catch_up`` after downtime:
        ``"latest"``, ``"all"`` (at most 1,000) or ``"skip"``. ``overlap=False``: an
        occurrence due while its predecessor runs waits for it.

        Raises before anything changes: ``TypeError``/``ValueError`` for both or neither of
        ``cron``/``every``, ``every <= 0``, an invalid cron expression (naming its field), an
        unknown time zone, a naive ``start``, a name that is not a valid key or has an ``@``;
        ``UnknownHandler``.
        """
        self._check_open()
        return await self._series.schedule(
            name, handler, cron, every, tz, payload, catch_up, overlap, start
        )

    async def cancel_recurring(self, name: str, *, version: int | None = None) -> bool:
        """Stop the recurrence ``name`` (only if ``version`` is its live version, when given):
        True if it was live and is now cancelled. Its pending occurrence is cancelled; a running
        one finishes. A stale call (an older version) never touches a newer rule."""
        self._check_open()
        check_version(version)
        return await self._series.cancel(name, version)

    async def recurrences(self) -> list[RecurrenceInfo]:
        """The live recurrences of this engine's journal (on PostgreSQL: of every node), by
        name, with their next occurrence's due (None if none is pending)."""
        self._check_open()
        return await recurrences(self)
