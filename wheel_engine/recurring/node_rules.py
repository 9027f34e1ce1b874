"""On PostgreSQL, the recurrence records a node keeps for its chain (#25).

A record is due in 9999, so no horizon load brings it; yet the chain
(:class:`~wheel_engine.recurring.chain.Chain`) needs its rule, in memory, to commit an
occurrence's successor with the occurrence's claim. :class:`NodeRules` is the node's
:class:`~wheel_engine.nodes.adopting.RecordWatcher` for records:

- a node that takes a partition over reads the records of the occurrences it loads there, in
  one query per load, before it places them (``Adopter.adopt``), and installs the successors'
  planning (``Series._watch``), so the first occurrence it runs commits its successor with its
  claim like every later one;
- each record row the node sees (its own schedules, the change feed of its partitions) is
  kept if newer than the rule held: a rule replaced or cancelled on another node is followed.

Nothing here is asked per occurrence: a load with no occurrence of an unknown series reads
nothing. If the read fails, the occurrence's handler looks the record up (as before).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Final

from wheel_engine.model import TimerState
from wheel_engine.payload import decode_payload
from wheel_engine.recurring.chain import Chain
from wheel_engine.recurring.records import RULE_HANDLER, occurrence_handler, rule_key
from wheel_engine.recurring.rule import SEPARATOR, occurrence_of

if TYPE_CHECKING:
    from journal.postgres import StoredTimer

__all__ = ["NodeRules"]

_OCCURRENCES: Final = occurrence_handler("")  # what every occurrence handler's name starts with


class NodeRules:
    """The records a node keeps for ``chain`` (see the module docstring)."""

    __slots__ = ("_chain", "_watch")

    handler = RULE_HANDLER

    def __init__(self, chain: Chain, watch: Callable[[], None]) -> None:
        self._chain = chain
        self._watch = watch  # a live rule is kept: this engine has a recurrence to care for

    def keep(self, row: StoredTimer) -> None:
        """A record's row: its rule is kept (decoded once per version), or dropped if the
        recurrence is cancelled; a row older than the rule kept changes nothing."""
        name = row.key.rpartition(SEPARATOR)[0]
        held = self._chain.version_of(name)
        if held is not None and held > row.version:
            return
        if row.state is not TimerState.PENDING:
            self._chain.forget(name)
        elif held != row.version:
            self._chain.keep(name, row.version, decode_payload(row.payload))
            self._watch()  # successors planned from now on (Series._watch; idempotent)

    def needs(self, rows: Iterable[StoredTimer]) -> set[str]:
        """The record keys of the pending occurrences among ``rows`` whose rule is not kept
        (one string test per other row: loads run to 100,000 rows)."""
        prefix, kept = _OCCURRENCES, self._chain.version_of
        wanted: set[str] = set()
        for row in rows:
            if row.handler.startswith(prefix) and row.state is TimerState.PENDING:
                found = occurrence_of(row.key)
                if found is not None and kept(found[0]) is None:
                    wanted.add(rule_key(found[0]))
        return wanted
