"""``Engine.recurrences()``: the live recurrences and the next occurrence of each.

In memory and on SQLite one engine holds every timer of its journal, so its table is the
answer. On PostgreSQL a node's table holds only the partitions it leases, and never a record
(due in 9999, no horizon load brings it): the database is asked, in one statement over the
record rows (:meth:`journal.postgres.reads.Reading.records`), so every node lists the same
recurrences, whichever node scheduled them or holds them now.

Both give the same shape: :class:`~wheel_engine.recurring.records.RecurrenceInfo` by name,
``next_due`` the due of the recurrence's first pending occurrence (None if it has none).
"""

from __future__ import annotations

from typing import Any

from wheel_engine.model import TimerState
from wheel_engine.payload import decode_payload
from wheel_engine.recurring.records import (
    RULE_HANDLER,
    RecurrenceInfo,
    info_of,
    occurrence_handler,
    user_handler,
)
from wheel_engine.recurring.rule import SEPARATOR, occurrence_of

__all__ = ["recurrences"]


async def recurrences(engine: Any) -> list[RecurrenceInfo]:
    """The live recurrences of ``engine``'s journal, by name (see the module docstring)."""
    if engine._node is not None:
        return await _stored(engine._node.store)
    return _held(engine)


async def _stored(store: Any) -> list[RecurrenceInfo]:
    """PostgreSQL: the database's records, whichever node holds them."""
    out = []
    for record in await store.records(RULE_HANDLER, occurrence_handler("")):
        row = record.row
        name = row.key.rpartition(SEPARATOR)[0]
        out.append(info_of(name, decode_payload(row.payload), row.version, record.next_due))
    return sorted(out)


def _held(engine: Any) -> list[RecurrenceInfo]:
    """In memory and SQLite: the engine's table holds every timer of its journal."""
    pending: dict[str, float] = {}
    for info in engine.timers(TimerState.PENDING):
        found = occurrence_of(info.key)
        if found is not None and user_handler(info.handler) is not None:
            name = found[0]
            pending[name] = min(info.due, pending.get(name, info.due))
    out = []
    for record in engine.timers(TimerState.PENDING, RULE_HANDLER):
        name = record.key.rpartition(SEPARATOR)[0]
        out.append(info_of(name, record.payload, record.version, pending.get(name)))
    return sorted(out)
