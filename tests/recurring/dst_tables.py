"""The daylight saving tables: for each zone's 2026 spring-forward and fall-back night, the
instants (UTC) at which four cron expressions are due, worked out by hand from the zones'
published transitions, not by any cron code.

The rule (``docs/contract.md``): a local time that does not exist fires once, at the first
instant after the gap; a local time that happens twice fires once, at its first instant.

- Europe/Berlin: 2026-03-29 01:00Z, 02:00 CET -> 03:00 CEST; 2026-10-25 01:00Z, 03:00 CEST ->
  02:00 CET.
- America/New_York: 2026-03-08 07:00Z, 02:00 EST -> 03:00 EDT; 2026-11-01 06:00Z, 02:00 EDT
  -> 01:00 EST.

Each row: (zone, expression, window start, window end, the due instants inside the window).
``scripts/cron_dst_tables.py`` holds other cron libraries to the same rows.
"""

from __future__ import annotations

Row = tuple[str, str, str, str, tuple[str, ...]]

BERLIN = "Europe/Berlin"
NEW_YORK = "America/New_York"


def _quarters(start_hour: int, day: str, hours: int) -> tuple[str, ...]:
    return tuple(
        f"{day}T{start_hour + m // 60:02d}:{m % 60:02d}:00Z" for m in range(0, hours * 60 + 1, 15)
    )


TABLES: tuple[Row, ...] = (
    # 30 2 * * *: the skipped 02:30 fires at the transition; the repeated one on its first pass.
    (
        BERLIN,
        "30 2 * * *",
        "2026-03-28T00:00:00Z",
        "2026-03-30T12:00:00Z",
        ("2026-03-28T01:30:00Z", "2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"),
    ),
    (
        BERLIN,
        "30 2 * * *",
        "2026-10-24T00:00:00Z",
        "2026-10-26T12:00:00Z",
        ("2026-10-24T00:30:00Z", "2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"),
    ),
    (
        NEW_YORK,
        "30 2 * * *",
        "2026-03-07T00:00:00Z",
        "2026-03-09T12:00:00Z",
        ("2026-03-07T07:30:00Z", "2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"),
    ),
    # New York repeats 01:00-01:59, so 02:30 EST exists once on 2026-11-01.
    (
        NEW_YORK,
        "30 2 * * *",
        "2026-10-31T00:00:00Z",
        "2026-11-02T12:00:00Z",
        ("2026-10-31T06:30:00Z", "2026-11-01T07:30:00Z", "2026-11-02T07:30:00Z"),
    ),
    # 0 * * * *: spring-forward loses no UTC hour (02:00 becomes 03:00, once); fall-back's
    # second pass of the repeated hour is not fired again.
    (
        BERLIN,
        "0 * * * *",
        "2026-03-28T22:00:00Z",
        "2026-03-29T04:00:00Z",
        (
            "2026-03-28T22:00:00Z",
            "2026-03-28T23:00:00Z",
            "2026-03-29T00:00:00Z",
            "2026-03-29T01:00:00Z",
            "2026-03-29T02:00:00Z",
            "2026-03-29T03:00:00Z",
            "2026-03-29T04:00:00Z",
        ),
    ),
    (
        BERLIN,
        "0 * * * *",
        "2026-10-24T22:00:00Z",
        "2026-10-25T03:00:00Z",
        (
            "2026-10-24T22:00:00Z",
            "2026-10-24T23:00:00Z",
            "2026-10-25T00:00:00Z",
            "2026-10-25T02:00:00Z",
            "2026-10-25T03:00:00Z",
        ),
    ),
    (
        NEW_YORK,
        "0 * * * *",
        "2026-03-08T05:00:00Z",
        "2026-03-08T09:00:00Z",
        (
            "2026-03-08T05:00:00Z",
            "2026-03-08T06:00:00Z",
            "2026-03-08T07:00:00Z",
            "2026-03-08T08:00:00Z",
            "2026-03-08T09:00:00Z",
        ),
    ),
    (
        NEW_YORK,
        "0 * * * *",
        "2026-11-01T04:00:00Z",
        "2026-11-01T08:00:00Z",
        (
            "2026-11-01T04:00:00Z",
            "2026-11-01T05:00:00Z",
            "2026-11-01T07:00:00Z",
            "2026-11-01T08:00:00Z",
        ),
    ),
    # */15 * * * *: the skipped hour's four quarters are one occurrence at the transition.
    (
        BERLIN,
        "*/15 * * * *",
        "2026-03-29T00:00:00Z",
        "2026-03-29T02:00:00Z",
        _quarters(0, "2026-03-29", 2),
    ),
    (
        BERLIN,
        "*/15 * * * *",
        "2026-10-25T00:00:00Z",
        "2026-10-25T02:00:00Z",
        (
            "2026-10-25T00:00:00Z",
            "2026-10-25T00:15:00Z",
            "2026-10-25T00:30:00Z",
            "2026-10-25T00:45:00Z",
            "2026-10-25T02:00:00Z",
        ),
    ),
    (
        NEW_YORK,
        "*/15 * * * *",
        "2026-03-08T06:00:00Z",
        "2026-03-08T08:00:00Z",
        _quarters(6, "2026-03-08", 2),
    ),
    (
        NEW_YORK,
        "*/15 * * * *",
        "2026-11-01T05:00:00Z",
        "2026-11-01T07:00:00Z",
        (
            "2026-11-01T05:00:00Z",
            "2026-11-01T05:15:00Z",
            "2026-11-01T05:30:00Z",
            "2026-11-01T05:45:00Z",
            "2026-11-01T07:00:00Z",
        ),
    ),
    # 0 9 * * 1-5: weekday mornings keep 09:00 local on both sides of the Sunday change.
    (
        BERLIN,
        "0 9 * * 1-5",
        "2026-03-27T00:00:00Z",
        "2026-03-31T23:00:00Z",
        ("2026-03-27T08:00:00Z", "2026-03-30T07:00:00Z", "2026-03-31T07:00:00Z"),
    ),
    (
        BERLIN,
        "0 9 * * 1-5",
        "2026-10-23T00:00:00Z",
        "2026-10-27T23:00:00Z",
        ("2026-10-23T07:00:00Z", "2026-10-26T08:00:00Z", "2026-10-27T08:00:00Z"),
    ),
    (
        NEW_YORK,
        "0 9 * * 1-5",
        "2026-03-06T00:00:00Z",
        "2026-03-10T23:00:00Z",
        ("2026-03-06T14:00:00Z", "2026-03-09T13:00:00Z", "2026-03-10T13:00:00Z"),
    ),
    (
        NEW_YORK,
        "0 9 * * 1-5",
        "2026-10-30T00:00:00Z",
        "2026-11-03T23:00:00Z",
        ("2026-10-30T13:00:00Z", "2026-11-02T14:00:00Z", "2026-11-03T14:00:00Z"),
    ),
)
