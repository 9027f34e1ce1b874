"""A recurrence's rule: ``every`` without drift, the occurrences' keys, catch-up, bad input."""

from __future__ import annotations

import datetime as dt
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wheel_engine.recurring.rule import (
    MAX_CATCH_UP,
    CronRule,
    EveryRule,
    catch_up_plan,
    check_recurrence_name,
    first_due,
    occurrence_key,
    occurrence_of,
    parse_rule,
    zone,
)

NOW = 1_796_212_800.0  # 2026-12-02T12:00:00Z


def test_every_counts_from_the_nominal_times_and_never_drifts() -> None:
    rule = EveryRule(0.2, 1000.0)
    due = 999.0
    for _ in range(10_000):
        due = rule.next_after(due)
    assert due == 1000.0 + 9_999 * 0.2 == 2999.8
    # asked late (a handler ran long), the next nominal time is still on the grid
    assert rule.next_after(1000.95) == 1001.0


@given(st.floats(0.001, 1e6), st.floats(0, 2e9), st.floats(-1e6, 1e7))
def test_every_is_the_first_grid_point_strictly_after(
    every: float, anchor: float, ahead: float
) -> None:
    rule = EveryRule(every, anchor)
    anchor = rule.anchor  # the grid is in whole microseconds: 1.9765625 is 1.976562
    instant = anchor + ahead
    due = rule.next_after(instant)
    assert due > instant
    if instant >= anchor:
        assert due - instant <= every + 1e-6 * max(1.0, abs(instant))
    else:
        assert due == pytest.approx(anchor, abs=1e-6)


def test_a_new_recurrence_first_fires_at_its_start_or_its_next_time() -> None:
    every = parse_rule(None, 300, "UTC", None, NOW)
    assert first_due(every, None, NOW) == NOW + 300
    at_start = parse_rule(None, 300, "UTC", NOW + 50, NOW)
    assert first_due(at_start, NOW + 50, NOW) == NOW + 50
    cron = parse_rule("*/5 * * * *", None, "UTC", None, NOW)
    assert first_due(cron, None, NOW) == NOW  # 12:00:00 matches
    assert first_due(cron, None, NOW + 1) == NOW + 300
    later = dt.datetime(2026, 12, 3, 9, 2, tzinfo=zone("Europe/Berlin"))
    assert first_due(cron, later, NOW) == later.timestamp() + 180  # 09:05 in Berlin
    past = parse_rule(None, 60, "UTC", NOW - 90, NOW)
    assert first_due(past, NOW - 90, NOW) == NOW + 30  # nothing before now


@pytest.mark.parametrize(
    ("nominal", "key"),
    [
        (NOW, "sweep@2026-12-02T12:00:00Z"),
        (NOW + 0.2, "sweep@2026-12-02T12:00:00.200Z"),
        (NOW + 0.000_5, "sweep@2026-12-02T12:00:00.000500Z"),
    ],
)
def test_an_occurrence_is_named_by_its_nominal_time_in_utc(nominal: float, key: str) -> None:
    assert occurrence_key("sweep", nominal) == key
    read = occurrence_of(key)
    assert read is not None and read[0] == "sweep" and abs(read[1] - nominal) < 1e-6


@pytest.mark.parametrize(
    "key",
    [
        "sweep",
        "@2026-12-02T12:00:00Z",
        "sweep@2026-12-02T12:00:00",
        "sweep@soon Z",
        "a@2026-12-02T12:00:00.0Z",
    ],
)
def test_a_key_that_is_no_occurrence_reads_as_none(key: str) -> None:
    assert occurrence_of(key) is None


def test_catch_up_after_downtime() -> None:
    rule = EveryRule(60, NOW)
    pending, now = NOW, NOW + 60 * 4 + 30  # down for four and a half minutes
    assert catch_up_plan(rule, pending, now, "all") == (
        [NOW, NOW + 60, NOW + 120, NOW + 180, NOW + 240],
        NOW + 300,
    )
    assert catch_up_plan(rule, pending, now, "latest") == ([NOW + 240], NOW + 300)
    assert catch_up_plan(rule, pending, now, "skip") == ([], NOW + 300)
    assert catch_up_plan(rule, NOW + 60, NOW, "all") == ([], NOW + 60)  # nothing missed


def test_catch_up_all_fires_at_most_the_latest_thousand() -> None:
    rule = EveryRule(1, NOW)
    fired, following = catch_up_plan(rule, NOW, NOW + 5000.5, "all")
    assert len(fired) == MAX_CATCH_UP
    assert fired[0] == NOW + 5001 - MAX_CATCH_UP and fired[-1] == NOW + 5000
    assert following == NOW + 5001


@pytest.mark.parametrize(
    ("cron", "every", "tz", "start", "error", "match"),
    [
        (None, None, "UTC", None, TypeError, "exactly one"),
        ("* * * * *", 60, "UTC", None, TypeError, "exactly one"),
        (None, 0, "UTC", None, ValueError, "above 0"),
        (None, -5, "UTC", None, ValueError, "above 0"),
        (None, math.inf, "UTC", None, ValueError, "above 0"),
        (None, math.nan, "UTC", None, ValueError, "above 0"),
        (None, True, "UTC", None, ValueError, "above 0"),
        (None, "60", "UTC", None, ValueError, "above 0"),
        (None, 1e-9, "UTC", None, ValueError, "microsecond"),
        ("61 * * * *", None, "UTC", None, ValueError, "minute field"),
        ("* * * * *", None, "Mars/Olympus", None, ValueError, "unknown time zone"),
        ("* * * * *", None, "../../etc/passwd", None, ValueError, "unknown time zone"),
        ("* * * * *", None, 5, None, TypeError, "tz must be a str"),
        ("* * * * *", None, "UTC", dt.datetime(2026, 12, 2, 12), ValueError, "naive"),
        ("* * * * *", None, "UTC", "tomorrow", TypeError, "start must be"),
        (7, None, "UTC", None, TypeError, "cron must be a str"),
    ],
)
def test_bad_input_says_what_is_wrong(
    cron: object, every: object, tz: object, start: object, error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        parse_rule(cron, every, tz, start, NOW)


@pytest.mark.parametrize(
    ("name", "match"), [("a@b", "must not contain"), ("", "empty"), (3, "must be a str")]
)
def test_a_recurrence_name_is_a_key_without_the_separator(name: object, match: str) -> None:
    with pytest.raises((TypeError, ValueError), match=match):
        check_recurrence_name(name)


def test_a_cron_rule_is_evaluated_in_its_zone() -> None:
    rule = CronRule("0 9 * * *", zone("America/New_York"))
    assert occurrence_key("digest", rule.next_after(NOW)) == "digest@2026-12-02T14:00:00Z"


def test_an_anchor_between_microseconds_is_not_skipped_by_an_instant_just_before_it() -> None:
    # hypothesis found it on Python 3.13: the anchor was rounded down to 1.757812, so the
    # instant 1.7578124999... was already past the grid's first point
    anchor = 1.7578125
    rule = EveryRule(1.0, anchor)
    assert rule.next_after(math.nextafter(anchor, 0.0)) == pytest.approx(anchor, abs=1e-6)
    assert rule.next_after(math.nextafter(anchor, 0.0)) >= anchor
