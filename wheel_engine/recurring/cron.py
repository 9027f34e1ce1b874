"""Five-field cron expressions, evaluated in an IANA time zone, with one rule for daylight saving.

A :class:`CronExpression` is parsed once and answers one question: the first instant after a
given instant at which it is due (:meth:`CronExpression.next_after`). It works in two steps:

1. **Local candidates.** The fields match *wall-clock* minutes in the zone: ``30 2 * * *`` is
   "02:30 on the clock on the wall". :meth:`next_local` finds the next matching naive local
   minute by moving the largest field that does not match (month, then day, then hour, then
   minute) to its next allowed value and resetting the smaller ones, so it takes a few steps
   per call, never a minute-by-minute scan.
2. **From wall clock to instant**, by the rule of ``docs/contract.md``:

   - a local time that exists once is that instant;
   - a local time that happens twice (clocks go back) is its *first* instant (``fold=0``), and
     the second pass of that hour matches nothing;
   - a local time that does not exist (clocks go forward) is the first instant after the gap,
     the transition itself.

   This map never goes backwards (a later wall-clock minute is never an earlier instant), so
   the candidates after the wall-clock reading of ``t`` are the only ones that can be after
   ``t``; several candidates can land on one instant (every minute of a skipped hour lands on
   the transition), and that instant is one occurrence.

A worked example, ``*/15 * * * *`` in Europe/Berlin on 2026-03-29, when 02:00 CET jumps to
03:00 CEST (01:00 UTC): after 01:45 CET the local candidates are 02:00, 02:15, 02:30, 02:45
(none exists: all map to the transition, 03:00 CEST) and 03:00 (the transition again). So the
occurrences are 01:45 CET, then 03:00 CEST once, then 03:15 CEST. On 2026-10-25, when 03:00
CEST goes back to 02:00 CET, 02:00-02:45 happen twice and fire on their first pass only (CEST);
the next occurrence after 02:45 CEST is 03:00 CET, an hour and a quarter later.

Fields: minute (0-59), hour (0-23), day of month (1-31), month (1-12 or ``jan``-``dec``), day
of week (0-7, 0 and 7 are Sunday, or ``sun``-``sat``). Each is ``*``, a number, a range
``a-b``, a step ``*/n``, ``a-b/n`` or ``a/n`` (from ``a`` to the field's end), or a list of
these separated by commas. As in every cron since Vixie's, when both the day of month and the
day of week are restricted, a day matches if *either* does. The macros ``@yearly``
(``@annually``), ``@monthly``, ``@weekly``, ``@daily`` (``@midnight``) and ``@hourly`` stand for
their five fields. An expression that parses but can never match (``0 0 31 2 *``) is refused,
not left to wait forever.
"""

from __future__ import annotations

import bisect
import datetime as dt
import math
from typing import Final
from zoneinfo import ZoneInfo

from wheel_engine.errors import WheelEngineError

__all__ = ["CronError", "CronExpression"]

_UTC: Final = dt.UTC
_MINUTE: Final = dt.timedelta(minutes=1)
_DAY: Final = dt.timedelta(days=1)

#: The fields in order: name, lowest and highest value.
_FIELDS: Final = (
    ("minute", 0, 59),
    ("hour", 0, 23),
    ("day of month", 1, 31),
    ("month", 1, 12),
    ("day of week", 0, 7),
)
_MONTH_NAMES: Final = (
    "jan",
    "feb",
    "mar",
    "apr",
    "may",
    "jun",
    "jul",
    "aug",
    "sep",
    "oct",
    "nov",
    "dec",
)
_MONTHS: Final = {name: n for n, name in enumerate(_MONTH_NAMES, 1)}
_WEEKDAYS: Final = {
    name: n for n, name in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))
}
_NAMES: Final = (None, None, None, _MONTHS, _WEEKDAYS)
_MACROS: Final = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
#: How far ahead a match is looked for. Every expression that can match at all matches within
#: eight years: the rarest day is 29 February, and 2100 is not a leap year.
_SEARCH_YEARS: Final = 8


class CronError(WheelEngineError, ValueError):
    """A cron expression that cannot be used; the message names the field at fault."""


class CronExpression:
    """A parsed five-field cron expression, due at wall-clock minutes of the zone ``tz``.

    Guarantees: :meth:`next_after` returns an instant strictly later than the one it is given,
    and iterating it from any instant yields every occurrence once, in order, by the daylight
    saving rule of the module's docstring. Parsing raises :class:`CronError` naming the field
    for anything malformed, out of range or never due.
    """

    __slots__ = (
        "_days",
        "_dom_any",
        "_dow_any",
        "_hours",
        "_minutes",
        "_months",
        "_weekdays",
        "expression",
        "tz",
    )

    def __init__(self, expression: str, tz: ZoneInfo) -> None:
        if not isinstance(expression, str):
            raise CronError(f"a cron expression is a str, not {type(expression).__name__}")
        self.expression = expression
        self.tz = tz
        text = _MACROS.get(expression.strip().lower(), expression)
        parts = text.split()
        if len(parts) != 5:
            raise CronError(
                f"cron expression {expression!r} has {len(parts)} fields; it needs five "
                "(minute, hour, day of month, month, day of week) or a macro such as @daily"
            )
        fields = [_parse_field(part, index) for index, part in enumerate(parts)]
        self._minutes, self._hours, days, months, weekdays = (tuple(sorted(f)) for f in fields)
        self._days = frozenset(days)
        self._months = months
        self._weekdays = frozenset(d % 7 for d in weekdays)  # 7 is Sunday too
        # Vixie cron's rule: a day field that starts with "*" (also "*/2") leaves the choice of
        # day to the other one; only two restricted fields are combined with "or".
        self._dom_any = parts[2].startswith("*")
        self._dow_any = parts[4].startswith("*")
        if (
            self.next_local(dt.datetime(2000, 1, 1)) is None
        ):  # a leap year's start: the widest search
            raise CronError(
                f"cron expression {expression!r} is never due: no month has that day of month"
            )

    def __repr__(self) -> str:
        return f"CronExpression({self.expression!r}, {self.tz.key!r})"

    def next_after(self, instant: float) -> float:
        """The first occurrence strictly after ``instant`` (epoch seconds), as epoch seconds."""
        # The whole second at or before it: fromtimestamp would round 11:59:59.9999999 up to
        # 12:00:00 and so skip a 12:00 that is still ahead.
        local = dt.datetime.fromtimestamp(math.floor(instant), self.tz).replace(tzinfo=None)
        while True:
            candidate = self.next_local(local)
            if candidate is None:  # pragma: no cover - refused at parse time
                raise CronError(f"cron expression {self.expression!r} is never due")
            due = self._instant(candidate)
            if due > instant:
                return due
            local = candidate  # the second pass of a repeated hour, or a skipped hour's minutes

    def matches_day(self, day: dt.date) -> bool:
        """Whether the day-of-month and day-of-week fields (with cron's either-or) allow ``day``."""
        in_month = day.day in self._days
        in_week = day.isoweekday() % 7 in self._weekdays
        if self._dom_any or self._dow_any:
            return in_month and in_week
        return in_month or in_week

    def next_local(self, after: dt.datetime) -> dt.datetime | None:
        """The first naive wall-clock minute strictly after ``after`` that the fields match, or
        None if there is none within the search horizon."""
        t = after.replace(second=0, microsecond=0) + _MINUTE
        last_year = after.year + _SEARCH_YEARS
        while t.year <= last_year:
            if t.month not in self._months:
                month = _next_value(self._months, t.month + 1)
                year = t.year if month is not None else t.year + 1
                t = dt.datetime(year, month if month is not None else self._months[0], 1)
                continue
            if not self.matches_day(t.date()):
                t = dt.datetime(t.year, t.month, t.day) + _DAY
                continue
            hour = _next_value(self._hours, t.hour)
            if hour is None:
                t = dt.datetime(t.year, t.month, t.day) + _DAY
                continue
            if hour != t.hour:
                t = t.replace(hour=hour, minute=self._minutes[0])
                return t
            minute = _next_value(self._minutes, t.minute)
            if minute is None:
                following = _next_value(self._hours, t.hour + 1)
                if following is None:
                    t = dt.datetime(t.year, t.month, t.day) + _DAY
                    continue
                return t.replace(hour=following, minute=self._minutes[0])
            return t.replace(minute=minute)
        return None

    def _instant(self, local: dt.datetime) -> float:
        """Epoch seconds of a wall-clock time by the daylight saving rule (module docstring)."""
        first = local.replace(tzinfo=self.tz, fold=0)
        instant = first.timestamp()
        if dt.datetime.fromtimestamp(instant, self.tz).replace(tzinfo=None) == local:
            return instant  # it exists; fold=0 is the first pass of a repeated hour
        # In a gap: fold=0 reads it with the offset before the jump, which lands after the
        # transition; fold=1 reads it with the offset after, which lands before. The transition
        # is the first instant between them whose offset is the later one.
        before = local.replace(tzinfo=self.tz, fold=1).timestamp()
        return _transition(self.tz, int(before), int(instant))


def _transition(tz: ZoneInfo, low: int, high: int) -> float:
    """The first whole second in ``(low, high]`` whose UTC offset in ``tz`` is ``high``'s."""
    offset = _offset(tz, high)
    while high - low > 1:
        middle = (low + high) // 2
        if _offset(tz, middle) == offset:
            high = middle
        else:
            low = middle
    return float(high)


def _offset(tz: ZoneInfo, instant: int) -> dt.timedelta | None:
    return dt.datetime.fromtimestamp(instant, _UTC).astimezone(tz).utcoffset()


def _next_value(values: tuple[int, ...], at_least: int) -> int | None:
    """The smallest of the sorted ``values`` that is at least ``at_least``, or None."""
    index = bisect.bisect_left(values, at_least)
    return values[index] if index < len(values) else None


def _parse_field(text: str, index: int) -> set[int]:
    name, low, high = _FIELDS[index]
    names = _NAMES[index]
    values: set[int] = set()
    for item in text.split(","):
        values |= _parse_item(item.strip().lower(), name, low, high, names)
    return values


def _parse_item(
    item: str, name: str, low: int, high: int, names: dict[str, int] | None
) -> set[int]:
    def number(word: str) -> int:
        if names is not None and word in names:
            return names[word]
        if not word.isdigit() or not word.isascii():
            raise CronError(f"cron {name} field: {word!r} is not a number{_named(names)}")
        value = int(word)
        if not low <= value <= high:
            raise CronError(f"cron {name} field: {value} is outside {low}-{high}")
        return value

    if not item:
        raise CronError(f"cron {name} field: an empty item")
    base, slash, step_text = item.partition("/")
    step = 1
    if slash:
        if not step_text.isdigit() or not step_text.isascii() or int(step_text) == 0:
            raise CronError(f"cron {name} field: step {step_text!r} is not a positive number")
        step = int(step_text)
    if base == "*":
        first, last = low, high
    elif "-" in base:
        start_text, _, end_text = base.partition("-")
        first, last = number(start_text), number(end_text)
        if first > last:
            raise CronError(f"cron {name} field: range {base!r} runs backwards")
    else:
        first = number(base)
        last = high if slash else first
    if name == "day of week" and base == "*":
        last = 6  # 7 is Sunday again: */2 must not add Sunday twice
    return set(range(first, last + 1, step))


def _named(names: dict[str, int] | None) -> str:
    if names is None:
        return ""
    return " or a name (" + ", ".join(list(names)[:3]) + ", ...)"
