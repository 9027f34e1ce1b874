"""A recurrence's durable record: what is stored, and what :class:`RecurrenceInfo` shows.

The record is an ordinary timer (so it is durable in memory, on SQLite and on PostgreSQL
alike, and has a version like any timer): key ``f"{name}@rule"``, handler :data:`RULE_HANDLER`,
due :data:`DORMANT_DUE` (it never fires), payload the rule as a msgpack-plain ``dict``. A stale
``cancel_recurring`` cancels it with its version, so it never touches a newer rule.

Its occurrences run under the handler :func:`occurrence_handler` derives from the user's
(``recurring:sweep``): a spec with the user's timeout, retry policy and error describer whose
function first keeps the series going, then calls the user's.
"""

from __future__ import annotations

from typing import Any, Final, NamedTuple

from wheel_engine.recurring.rule import SEPARATOR, CronRule, EveryRule, Rule, zone

__all__ = [
    "DORMANT_DUE",
    "RULE_HANDLER",
    "RecurrenceInfo",
    "check_user_handler_name",
    "decode_rule",
    "encode_rule",
    "occurrence_handler",
    "rule_key",
]

#: The handler of a recurrence's record; it never fires (see :data:`DORMANT_DUE`).
RULE_HANDLER: Final = "wheel-engine:recurrence"
#: A record's due time: 9999-12-30T00:00:00Z, the last day a due time may have.
DORMANT_DUE: Final = 253_402_128_000.0
_OCCURRENCE_PREFIX: Final = "recurring:"


class RecurrenceInfo(NamedTuple):
    """A recurrence as :meth:`Engine.recurrences` and :meth:`Engine.schedule_recurring` show it."""

    name: str
    handler: str
    cron: str | None
    every: float | None
    tz: str
    payload: Any
    catch_up: str
    overlap: bool
    next_due: float | None  #: epoch seconds of the next occurrence known, None if none
    version: int


def rule_key(name: str) -> str:
    """The key of ``name``'s record (not an occurrence: :func:`occurrence_of` refuses it)."""
    return f"{name}{SEPARATOR}rule"


def occurrence_handler(handler: str) -> str:
    """The handler name occurrences of a recurrence of ``handler`` are scheduled under."""
    return _OCCURRENCE_PREFIX + handler


def check_user_handler_name(name: str) -> None:
    """Refuse a name the engine derives itself (``recurring:<handler>``) or uses for records:
    registered by a user, it would replace the handler a recurrence's occurrences run under,
    and the series would no longer go on."""
    if isinstance(name, str) and (user_handler(name) is not None or name == RULE_HANDLER):
        raise ValueError(
            f"handler name {name!r} is the engine's own (names starting with"
            f" {_OCCURRENCE_PREFIX!r} and {RULE_HANDLER!r} are reserved)"
        )


def user_handler(occurrence: str) -> str | None:
    """The user's handler of an occurrence handler name, or None for another name."""
    if occurrence.startswith(_OCCURRENCE_PREFIX):
        return occurrence[len(_OCCURRENCE_PREFIX) :]
    return None


def encode_rule(
    rule: CronRule | EveryRule,
    handler: str,
    payload: Any,
    catch_up: str,
    overlap: bool,
    first: float,
    trace: str | None = None,
) -> dict[str, Any]:
    """The record's payload: everything needed to go on with the series after a restart;
    ``trace``, the creator's trace context, only when there is one (tracing, #29: the record
    of an untraced recurrence holds no byte more)."""
    cron = rule.expression if isinstance(rule, CronRule) else None
    every = rule.every if isinstance(rule, EveryRule) else None
    anchor = rule.anchor if isinstance(rule, EveryRule) else None
    tz = rule.tz.key if isinstance(rule, CronRule) else "UTC"
    fields = {
        "handler": handler,
        "cron": cron,
        "every": every,
        "anchor": anchor,
        "tz": tz,
        "payload": payload,
        "catch_up": catch_up,
        "overlap": overlap,
        "first": first,
    }
    if trace is not None:
        fields["trace"] = trace
    return fields


def decode_rule(fields: dict[str, Any]) -> CronRule | EveryRule:
    """The rule a record's payload holds (the record was checked when it was scheduled)."""
    if fields["cron"] is not None:
        return CronRule(str(fields["cron"]), zone(fields["tz"]))
    return EveryRule(float(fields["every"]), float(fields["anchor"]))


def of_rule(fields: dict[str, Any], rule: Rule, nominal: float) -> bool:
    """Whether ``nominal`` is an occurrence of the record ``fields`` (whose rule is ``rule``):
    on its rule's grid and not before its first. An occurrence of a rule since replaced is not
    (the live rule's first occurrence was committed with its record)."""
    tick = 1e-6  # a float reading of a whole microsecond can round down
    return nominal >= fields["first"] - tick and rule.next_after(nominal - tick) == nominal


def info_of(
    name: str, fields: dict[str, Any], version: int, next_due: float | None
) -> RecurrenceInfo:
    """The :class:`RecurrenceInfo` of a record."""
    return RecurrenceInfo(
        name,
        str(fields["handler"]),
        fields["cron"],
        fields["every"],
        str(fields["tz"]),
        fields["payload"],
        str(fields["catch_up"]),
        bool(fields["overlap"]),
        next_due,
        version,
    )
