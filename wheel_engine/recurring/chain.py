"""The chain of a recurrence's occurrences: which one follows an occurrence, decided in memory.

:meth:`Chain.successor` is every occurrence handler's successor
(:attr:`~wheel_engine.handlers.HandlerSpec.successor`): as an occurrence's attempt is being
committed it returns the next occurrence to commit with it (:mod:`wheel_engine.successors`),
or None for an occurrence that is no longer one of a live rule (the recurrence cancelled, its
rule replaced since, or a timer scheduled under an occurrence handler by hand). It reads the
recurrence's record from the engine's table and the rule decoded from it, kept by record
version, so no I/O and no parse of a cron expression per occurrence; a rule replaced since
has a new version and is decoded again. On PostgreSQL a record (due in 9999) is beyond the
loaded horizon, so the rule is the one last seen: scheduled here, read with the occurrences of
a partition this node took (:mod:`.node_rules`), changed in its partition (the change feed), or
looked up by a handler. The occurrence's handler reads the record again and, if its version
moved on or it is gone, acts on the live rule and :meth:`Chain.forget` drops the one kept (so a
cancelled recurrence leaves at most one leftover occurrence, which then runs nothing).

The decision (``catch_up``, whether this occurrence runs at all) is kept for the occurrence's
handler (:meth:`Chain.planned`), so that the handler acts on the very plan whose successor was
committed: a plan made again later could name another successor (the clock moved on).
"""

from __future__ import annotations

from typing import Any, Final, NamedTuple

from wheel_engine.clock import Clock
from wheel_engine.handlers import Successor
from wheel_engine.key_index import KeyIndex
from wheel_engine.model import TimerState
from wheel_engine.recurring.records import (
    decode_rule,
    occurrence_handler,
    of_rule,
    rule_key,
    user_handler,
)
from wheel_engine.recurring.rule import Rule, catch_up_plan, occurrence_key, occurrence_of
from wheel_engine.timer import Timer

__all__ = ["Chain", "Plan"]


#: Plans held before the first prune (:meth:`Chain._prune`): a few recurrences' occurrences
#: in flight never reach it.
_PRUNE_AT: Final = 64
_LIVE: Final = (TimerState.PENDING, TimerState.RUNNING)


def _ended(timer: Timer | None) -> bool:
    """Whether an occurrence with a plan will not run here (again): gone from the table, ended."""
    return timer is None or timer.state not in _LIVE


class Plan(NamedTuple):
    """What an occurrence does: its recurrence, the record's fields, whether it runs (not
    skipped by ``catch_up``), and the nominal time of the occurrence that follows it."""

    name: str
    version: int  #: the record's version the plan was made under
    fields: dict[str, Any]
    run: bool
    following: float


class Chain:
    """The successors of one engine's occurrences; see the module docstring."""

    def __init__(self, timers: KeyIndex, clock: Clock, whole: bool) -> None:
        self._timers = timers  # the engine's table: the records are there (if ``whole``)
        self._whole = whole  # the table holds every record (SQLite, memory; not PostgreSQL)
        self._clock = clock
        self.started_at = float("inf")  #: occurrences due before it were missed: downtime
        self._rules: dict[str, tuple[int, dict[str, Any], Rule]] = {}  # name -> by version
        self._plans: dict[str, Plan] = {}  # occurrence key -> its plan, until its handler runs
        self._prune_at = _PRUNE_AT  # plans held beyond which those of no live timer go

    def successor(self, timer: Timer) -> Successor | None:
        """The occurrence after ``timer`` (its attempt is being committed), or None."""
        found = occurrence_of(timer.key)
        if found is None or user_handler(timer.handler) is None:
            return None
        plan = self._plan_of(found[0], found[1], self._clock.time())
        if plan is None:
            return None
        plans = self._plans
        plans[timer.key] = plan
        if len(plans) > self._prune_at:
            self._prune()
        fields = plan.fields
        return Successor(
            occurrence_key(plan.name, plan.following),
            occurrence_handler(str(fields["handler"])),
            plan.following,
            fields["payload"],
            fields.get("trace"),
        )

    def _prune(self) -> None:
        """Drop the plans whose occurrence will not run here: out of the table or ended (its
        claim was refused: claimed by another node, cancelled, or its partition lost). A plan
        is taken by its handler, or made again by the occurrence's next attempt, so these would
        stay for good. The next prune waits until the plans kept have doubled: amortised O(1)
        per plan, and never more than twice the live ones (or :data:`_PRUNE_AT`) are held."""
        timers, plans = self._timers, self._plans
        for key in [key for key in plans if _ended(timers.get(key))]:
            del plans[key]
        self._prune_at = max(_PRUNE_AT, 2 * len(plans))

    def planned(self, key: str) -> Plan | None:
        """The plan made as ``key``'s attempt was committed (taken: asked once per attempt),
        or None if its attempt's commit made none (on PostgreSQL, or no live rule)."""
        return self._plans.pop(key, None)

    def version_of(self, name: str) -> int | None:
        """The version of ``name``'s record whose rule is kept, or None if none is."""
        held = self._rules.get(name)
        return None if held is None else held[0]

    def forget(self, name: str) -> None:
        """The rule kept for ``name`` is stale (its record is cancelled or gone)."""
        self._rules.pop(name, None)

    def _plan_of(self, name: str, nominal: float, now: float) -> Plan | None:
        record = self._timers.get(rule_key(name))
        held = self._rules.get(name)
        if record is not None and record.state is TimerState.PENDING:
            if held is None or held[0] != record.version:
                return self.decide(name, nominal, record.version, record.info().payload, now)
        elif record is not None or self._whole:
            self.forget(name)
            return None  # the recurrence was cancelled: this occurrence is a leftover
        elif held is None:
            return None  # PostgreSQL, its record could not be read: its handler looks it up
        return self._decided(name, nominal, held, now)

    def decide(
        self, name: str, nominal: float, version: int, fields: dict[str, Any], now: float
    ) -> Plan | None:
        """The plan of ``name``'s occurrence due at ``nominal`` under the record ``fields`` at
        ``version`` (its rule decoded once per version), or None if it is not one of that rule."""
        return self._decided(name, nominal, self.keep(name, version, fields), now)

    def keep(
        self, name: str, version: int, fields: dict[str, Any]
    ) -> tuple[int, dict[str, Any], Rule]:
        """Keep ``name``'s record ``fields`` at ``version`` (just read or scheduled), its rule
        decoded unless that version's is kept already."""
        held = self._rules.get(name)
        if held is None or held[0] != version:
            held = self._rules[name] = (version, fields, decode_rule(fields))
        return held

    def _decided(
        self, name: str, nominal: float, held: tuple[int, dict[str, Any], Rule], now: float
    ) -> Plan | None:
        version, fields, rule = held
        if not of_rule(fields, rule, nominal):
            return None  # an occurrence of a rule since replaced
        run, following = self.plan(rule, nominal, now, str(fields["catch_up"]))
        return Plan(name, version, fields, run, following)

    def plan(self, rule: Rule, nominal: float, now: float, catch_up: str) -> tuple[bool, float]:
        """Whether this occurrence runs, and which nominal time to materialise next."""
        if nominal >= self.started_at:
            return True, rule.next_after(nominal)  # not missed: late only by the loop
        missed, following = catch_up_plan(rule, nominal, now, catch_up)
        if not missed:
            return False, following  # skip
        if missed[0] == nominal:
            return True, missed[1] if len(missed) > 1 else following
        return False, missed[0]  # another missed one fires instead (the latest, or the 1000)
