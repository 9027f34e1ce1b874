"""The timer states as this package's SQL writes them: the stored codes of :mod:`journal.state`
(the one definition of the states), to interpolate into statements, so that no statement
spells a state as a bare number and a renumbering could never leave SQL behind.

``wheel_timers.state`` holds :data:`journal.state.STATE_CODE`; a statement reads, for example,
``f"WHERE t.state = {PENDING_CODE}"``, and a set of states ``f"state IN {FINISHED_CODES}"``.
"""

from __future__ import annotations

from typing import Final

from journal.state import (
    CANCELED,
    DEAD,
    FINISHED,
    PENDING,
    RUNNING,
    STATE_CODE,
    SUCCEEDED,
    TimerState,
)

__all__ = [
    "CANCELED_CODE",
    "DEAD_CODE",
    "FINISHED_CODES",
    "LIVE_CODES",
    "PENDING_CODE",
    "REQUEUED_STATE",
    "RUNNING_CODE",
    "SUCCEEDED_CODE",
    "sql_set",
]

PENDING_CODE: Final = STATE_CODE[PENDING]
RUNNING_CODE: Final = STATE_CODE[RUNNING]
SUCCEEDED_CODE: Final = STATE_CODE[SUCCEEDED]
CANCELED_CODE: Final = STATE_CODE[CANCELED]
DEAD_CODE: Final = STATE_CODE[DEAD]


def sql_set(states: frozenset[TimerState]) -> str:
    """``states`` as an SQL list of codes in code order, e.g. ``(2, 3)``: the same text every
    time, since the partial index's predicate and the queries that use it must match."""
    return "(" + ", ".join(str(code) for code in sorted(STATE_CODE[s] for s in states)) + ")"


#: PENDING, RUNNING: the timer may still fire.
LIVE_CODES: Final = sql_set(frozenset({PENDING, RUNNING}))
#: SUCCEEDED, CANCELED: what the pruner may delete (``journal.state.FINISHED``).
FINISHED_CODES: Final = sql_set(FINISHED)
#: The state a RUNNING row of ``wheel_timers t`` goes back to when its run is given up without
#: an outcome (a takeover's reset, a requeue): CANCELED if a cancel was requested meanwhile,
#: else PENDING.
REQUEUED_STATE: Final = f"CASE WHEN t.cancel_requested THEN {CANCELED_CODE} ELSE {PENDING_CODE} END"
