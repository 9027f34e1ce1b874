"""Cron expressions: the daylight saving tables, a brute-force model, and the parse errors."""

from __future__ import annotations

import datetime as dt
import math
from zoneinfo import ZoneInfo

import pytest
from dst_tables import TABLES
from hypothesis import given
from hypothesis import strategies as st

from wheel_engine.recurring.cron import CronError, CronExpression

UTC = dt.UTC


def _epoch(stamp: str) -> float:
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _stamp(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def occurrences(cron: CronExpression, start: float, end: float) -> list[float]:
    """Every occurrence in ``[start, end]``, by iterating ``next_after``."""
    found: list[float] = []
    due = cron.next_after(start - 1)
    while due <= end:
        found.append(due)
        due = cron.next_after(due)
    return found


@pytest.mark.parametrize(("tz", "expression", "start", "end", "expected"), TABLES)
def test_the_daylight_saving_tables(
    tz: str, expression: str, start: str, end: str, expected: tuple[str, ...]
) -> None:
    cron = CronExpression(expression, ZoneInfo(tz))
    assert [_stamp(t) for t in occurrences(cron, _epoch(start), _epoch(end))] == list(expected)


# ---------------------------------------------------------------- the brute-force model
# The model walks every wall-clock minute of the window and maps each match to an instant by
# scanning UTC minutes, sharing nothing with the code under test but zoneinfo.

ZONES = ("UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata")


def _local(epoch: int, tz: ZoneInfo) -> dt.datetime:
    return dt.datetime.fromtimestamp(epoch, tz).replace(tzinfo=None)


def model(
    fields: tuple[set[int], set[int], set[int], set[int], set[int]],
    dom_any: bool,
    dow_any: bool,
    tz: ZoneInfo,
    start: int,
    end: int,
) -> list[float]:
    minutes, hours, days, months, weekdays = fields
    # Every UTC minute of a margin around the window, with the wall clock it shows.
    utc_minutes = range(start - 7200 - start % 60, end + 7200, 60)
    shown = [(u, _local(u, tz)) for u in utc_minutes]
    first_seen: dict[dt.datetime, int] = {}
    for u, local in shown:
        first_seen.setdefault(local, u)
    low, high = shown[0][1], shown[-1][1]
    due: set[float] = set()
    local = low
    while local <= high:
        in_month, in_week = local.day in days, local.isoweekday() % 7 in weekdays
        day_ok = (in_month and in_week) if (dom_any or dow_any) else (in_month or in_week)
        if local.minute in minutes and local.hour in hours and local.month in months and day_ok:
            if local in first_seen:
                instant = first_seen[local]  # exists: its first pass
            else:  # skipped: the first instant whose wall clock is past it
                instant = next(u for u, shows in shown if shows > local)
            if start <= instant <= end:
                due.add(float(instant))
        local += dt.timedelta(minutes=1)
    return sorted(due)


def _field(values: set[int]) -> str:
    return ",".join(str(v) for v in sorted(values))


@st.composite
def expressions(draw: st.DrawFn) -> tuple[str, tuple[set[int], ...], bool, bool]:
    minutes = draw(st.sets(st.integers(0, 59), min_size=1, max_size=6))
    hours = draw(st.one_of(st.none(), st.sets(st.integers(0, 23), min_size=1, max_size=5)))
    days = draw(st.one_of(st.none(), st.sets(st.integers(1, 31), min_size=1, max_size=6)))
    weekdays = draw(st.one_of(st.none(), st.sets(st.integers(0, 6), min_size=1, max_size=3)))
    parts = [
        _field(minutes),
        "*" if hours is None else _field(hours),
        "*" if days is None else _field(days),
        "*",
        "*" if weekdays is None else _field(weekdays),
    ]
    sets = (
        minutes,
        set(range(24)) if hours is None else hours,
        set(range(1, 32)) if days is None else days,
        set(range(1, 13)),
        set(range(7)) if weekdays is None else weekdays,
    )
    return " ".join(parts), sets, days is None, weekdays is None


@given(
    expressions(),
    st.sampled_from(ZONES),
    # around the 2026 transitions, or anywhere in 2026
    st.one_of(
        st.sampled_from(["2026-03-08", "2026-03-29", "2026-04-05", "2026-10-04", "2026-10-25"]),
        st.dates(dt.date(2026, 1, 1), dt.date(2026, 12, 30)).map(str),
    ),
)
def test_next_after_agrees_with_the_brute_force_model(
    expression: tuple[str, tuple[set[int], ...], bool, bool], tz_name: str, day: str
) -> None:
    text, sets, dom_any, dow_any = expression
    tz = ZoneInfo(tz_name)
    start = int(_epoch(f"{day}T00:00:00Z")) - 6 * 3600
    end = start + 36 * 3600
    cron = CronExpression(text, tz)
    expected = model(sets, dom_any, dow_any, tz, start, end)  # type: ignore[arg-type]
    assert occurrences(cron, start, end) == expected


@given(st.floats(1.7e9, 1.9e9), st.sampled_from(ZONES))
def test_next_after_is_strictly_later_and_minute_aligned_in_its_zone(
    instant: float, tz_name: str
) -> None:
    cron = CronExpression("*/7 * * * *", ZoneInfo(tz_name))
    due = cron.next_after(instant)
    assert instant < due <= instant + 2 * 3600
    assert due == int(due)


# ---------------------------------------------------------------- parsing


@pytest.mark.parametrize(
    ("expression", "minutes", "hours", "weekdays"),
    [
        ("*/20 9-17/4 * * mon-fri", {0, 20, 40}, {9, 13, 17}, {1, 2, 3, 4, 5}),
        ("5,10 0 * * 7", {5, 10}, {0}, {0}),
        ("30/10 * * * */2", {30, 40, 50}, set(range(24)), {0, 2, 4, 6}),
        ("@hourly", {0}, set(range(24)), set(range(7))),
        ("@weekly", {0}, {0}, {0}),
    ],
)
def test_the_field_syntax(
    expression: str, minutes: set[int], hours: set[int], weekdays: set[int]
) -> None:
    cron = CronExpression(expression, ZoneInfo("UTC"))
    assert set(cron._minutes) == minutes
    assert set(cron._hours) == hours
    assert cron._weekdays == weekdays


def test_months_by_name_and_the_either_or_of_the_day_fields() -> None:
    cron = CronExpression("0 0 13 feb,mar fri", ZoneInfo("UTC"))
    start = _epoch("2026-02-01T00:00:00Z")
    days = [
        dt.datetime.fromtimestamp(t, UTC).day for t in occurrences(cron, start, start + 86400 * 40)
    ]
    # Fridays of February and March, and the 13th of each (a Friday in February 2026 and March)
    assert days == [6, 13, 20, 27, 6, 13]


@pytest.mark.parametrize(
    ("expression", "names"),
    [
        ("61 * * * *", "minute"),
        ("* 24 * * *", "hour"),
        ("* * 0 * *", "day of month"),
        ("* * * 13 *", "month"),
        ("* * * * 8", "day of week"),
        ("* * * * xyz", "day of week"),
        ("*/0 * * * *", "minute"),
        ("* 5-1 * * *", "hour"),
        ("* 1,,2 * * *", "hour"),
        ("* * * * *,", "day of week"),
        ("* * * *", "five"),
        ("0 0 31 2 *", "never due"),
        ("0 0 30 feb *", "never due"),
        ("\u0661 * * * *", "minute"),  # an Arabic-Indic digit one is not a cron number
    ],
)
def test_a_bad_expression_names_its_field(expression: str, names: str) -> None:
    with pytest.raises(CronError, match=names):
        CronExpression(expression, ZoneInfo("UTC"))


def test_the_29th_of_february_is_found_four_years_ahead() -> None:
    cron = CronExpression("0 12 29 2 *", ZoneInfo("UTC"))
    assert _stamp(cron.next_after(_epoch("2028-03-01T00:00:00Z"))) == "2032-02-29T12:00:00Z"


def test_an_instant_a_hair_before_a_match_still_finds_it() -> None:
    cron = CronExpression("0 12 * * *", ZoneInfo("UTC"))
    noon = _epoch("2026-12-02T12:00:00Z")
    assert cron.next_after(math.nextafter(noon, -math.inf)) == noon  # the float just before
    assert cron.next_after(noon) == noon + 86400
