"""A recurrence's rule: when its occurrences are due, what each is called, and what downtime fires.

Everything here is pure (no engine, no I/O, no clock of its own), so the engine, the CLI and
the tests ask the same questions of the same code:

- :func:`parse_rule` checks a ``schedule_recurring`` call's ``cron``/``every``/``tz``/``start``
  and returns a :class:`CronRule` or an :class:`EveryRule`, or raises before anything changes;
- ``rule.next_after(t)`` is the first nominal time strictly after ``t``;
- :func:`occurrence_key` names the occurrence due at a nominal time
  (``sweep@2026-12-02T10:05:00Z``), and :func:`occurrence_of` reads that name back;
- :func:`catch_up_plan` says which missed occurrences fire after downtime.

``every`` counts real seconds from the previous *nominal* time, not from when a handler ended,
so the series never drifts: ``every=300`` anchored at 10:00:00 is due at 10:05:00, 10:10:00, ...
however long each run takes. Its arithmetic is in whole microseconds, so the ten-thousandth
occurrence of ``every=0.2`` is exactly 2,000 s after the anchor, not a float's sum of 0.2s.
"""

from __future__ import annotations

import datetime as dt
import math
from collections import deque
from typing import Final, Protocol
from zoneinfo import ZoneInfo

from wheel_engine.recurring.cron import CronError, CronExpression
from wheel_engine.validation import check_key

__all__ = [
    "CATCH_UP",
    "MAX_CATCH_UP",
    "CronError",
    "CronRule",
    "EveryRule",
    "Rule",
    "catch_up_plan",
    "check_recurrence_name",
    "first_due",
    "occurrence_key",
    "occurrence_of",
    "parse_rule",
    "zone",
]

#: What ``catch_up`` may say: fire the latest missed occurrence, all of them, or none.
CATCH_UP: Final = ("latest", "all", "skip")
#: ``catch_up="all"`` fires at most this many missed occurrences (the most recent ones).
MAX_CATCH_UP: Final = 1000
#: What separates a recurrence's name from its occurrence in a timer's key.
SEPARATOR: Final = "@"
_MICROS: Final = 1_000_000
#: "At or after t" is "after t - _TICK": no rule's nominal times are closer than a microsecond.
_TICK: Final = 1e-6


class Rule(Protocol):
    """When a recurrence is due: its nominal times, strictly increasing."""

    def next_after(self, instant: float) -> float:
        """The first nominal time strictly after ``instant`` (epoch seconds)."""
        ...


class CronRule:
    """A cron expression in a time zone (:mod:`wheel_engine.recurring.cron` has its rules)."""

    __slots__ = ("cron", "expression", "tz")

    def __init__(self, expression: str, tz: ZoneInfo) -> None:
        self.cron = CronExpression(expression, tz)
        self.expression = expression
        self.tz = tz

    def next_after(self, instant: float) -> float:
        return self.cron.next_after(instant)

    def __repr__(self) -> str:
        return f"CronRule({self.expression!r}, {self.tz.key!r})"


class EveryRule:
    """Due at ``anchor + k * every`` for k = 0, 1, 2, ...: fixed real-time steps, no time zone."""

    __slots__ = ("_anchor_us", "_every_us", "anchor", "every")

    def __init__(self, every: float, anchor: float) -> None:
        self.every = every
        self._every_us = max(1, round(every * _MICROS))
        # up, not to nearest: the grid's first point is never before the anchor asked for (a
        # start 0.4 µs past a microsecond would else land before it, and an instant between
        # the two would skip the first occurrence)
        self._anchor_us = math.ceil(anchor * _MICROS)
        self.anchor = self._anchor_us / _MICROS  # the grid's, to the microsecond

    def next_after(self, instant: float) -> float:
        behind = math.floor(instant * _MICROS) - self._anchor_us
        steps = 0 if behind < 0 else behind // self._every_us + 1
        due = (self._anchor_us + steps * self._every_us) / _MICROS
        while due <= instant:  # a float reading of a whole microsecond can round down
            steps += 1
            due = (self._anchor_us + steps * self._every_us) / _MICROS
        return due

    def __repr__(self) -> str:
        return f"EveryRule({self.every!r}, anchor={self.anchor!r})"


def zone(tz: object) -> ZoneInfo:
    """The IANA zone named ``tz``, or ``ValueError``/``TypeError`` saying why not."""
    if type(tz) is not str:
        raise TypeError(f"tz must be a str naming an IANA time zone, not {type(tz).__name__}")
    try:
        return ZoneInfo(tz)
    except (KeyError, ValueError, OSError):  # not found, not a valid key, unreadable
        raise ValueError(
            f"unknown time zone {tz!r} (an IANA name such as 'Europe/Berlin')"
        ) from None


def parse_rule(
    cron: object, every: object, tz: object, start: object, now: float
) -> CronRule | EveryRule:
    """The rule of a ``schedule_recurring`` call, checked; raises before anything changes.

    Exactly one of ``cron`` (five fields, in zone ``tz``) and ``every`` (seconds, finite, > 0)
    is given. ``start`` (an aware ``datetime`` or epoch seconds) is the first occurrence's
    earliest time. Without it, ``every`` is anchored one step after ``now`` and ``cron`` takes
    its next match after ``now``.
    """
    if (cron is None) == (every is None):
        raise TypeError("schedule_recurring takes exactly one of cron= and every=")
    zone_info = zone(tz)
    first = _start(start)
    if cron is not None:
        if type(cron) is not str:
            raise TypeError(f"cron must be a str, not {type(cron).__name__}")
        return CronRule(cron, zone_info)
    step = _seconds(every)
    if step is None or step <= 0:
        raise ValueError(f"every must be a finite number of seconds above 0, not {every!r}")
    if step * _MICROS < 1:
        raise ValueError(f"every must be at least a microsecond, not {every!r}")
    return EveryRule(step, first if first is not None else now + step)


def first_due(rule: Rule, start: object, now: float) -> float:
    """A new recurrence's first occurrence: its first nominal time at or after both ``start``
    (when given) and ``now``. A ``start`` in the past fires nothing for the times before now."""
    earliest = _start(start)
    moment = now if earliest is None else max(earliest, now)
    return rule.next_after(moment - _TICK)


def _start(start: object) -> float | None:
    if start is None:
        return None
    if isinstance(start, dt.datetime):
        if start.tzinfo is None or start.utcoffset() is None:
            raise ValueError("start must be an aware datetime (with a tzinfo), not a naive one")
        return start.timestamp()
    seconds = _seconds(start)
    if seconds is not None:
        return seconds
    raise TypeError(f"start must be an aware datetime or epoch seconds, not {type(start).__name__}")


def _seconds(value: object) -> float | None:
    """``value`` as finite float seconds, or None if it is not a finite int or float (a bool is
    not a number of seconds)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
        if math.isfinite(seconds):
            return seconds
    return None


def check_recurrence_name(name: object) -> str:
    """``name`` as a valid timer key without ``@`` (which separates it from the occurrence)."""
    checked = check_key(name)
    if SEPARATOR in checked:
        raise ValueError(f"a recurrence's name must not contain {SEPARATOR!r}: {checked!r}")
    return checked


def occurrence_key(name: str, nominal: float) -> str:
    """The key of ``name``'s occurrence due at ``nominal``: the nominal time in UTC, ISO 8601
    with a ``Z``, with milliseconds or microseconds only where the time has them."""
    micros = round(nominal * _MICROS)
    seconds, fraction = divmod(micros, _MICROS)
    stamp = dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    if fraction:
        stamp += f".{fraction // 1000:03d}" if fraction % 1000 == 0 else f".{fraction:06d}"
    return f"{name}{SEPARATOR}{stamp}Z"


def occurrence_of(key: str) -> tuple[str, float] | None:
    """``(name, nominal)`` of an occurrence's key, or None for a key that is not one."""
    name, separator, stamp = key.rpartition(SEPARATOR)
    if not separator or not name or not stamp.endswith("Z"):
        return None
    try:
        moment = dt.datetime.fromisoformat(stamp[:-1]).replace(tzinfo=dt.UTC)
    except ValueError:
        return None
    if occurrence_key(name, moment.timestamp()) != key:
        return None  # not the one spelling occurrence_key gives
    return name, moment.timestamp()


def catch_up_plan(
    rule: Rule, pending: float, now: float, catch_up: str
) -> tuple[list[float], float]:
    """After downtime: ``(missed occurrences to fire, oldest first; the next nominal time)``.

    ``pending`` is the nominal time of the occurrence that was waiting; every nominal time from
    it up to ``now`` was missed. ``"latest"`` fires the most recent of them once, ``"all"``
    fires each of them in order (the most recent :data:`MAX_CATCH_UP` if there are more),
    ``"skip"`` none; the series goes on at the first nominal time after ``now``. With nothing
    missed (``pending`` is still ahead), nothing fires and ``pending`` stays next.
    """
    if pending > now:
        return [], pending
    missed: deque[float] = deque((pending,), maxlen=MAX_CATCH_UP)
    nominal = rule.next_after(pending)
    while nominal <= now:
        missed.append(nominal)
        nominal = rule.next_after(nominal)
    if catch_up == "all":
        return list(missed), nominal
    if catch_up == "latest":
        return [missed[-1]], nominal
    return [], nominal
