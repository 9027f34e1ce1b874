"""Hold cron libraries to the daylight saving tables of ``tests/recurring/dst_tables.py``.

    python scripts/cron_dst_tables.py

runs each row through ``wheel_engine.recurring.cron`` and, where they are installed, through
``cronsim`` and ``croniter`` (neither is a dependency: ``pip install cronsim croniter`` in a
scratch environment), and prints which rows each gets right. ``docs/design.md`` ("Recurring
timers") gives the result and why the engine evaluates cron itself.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from zoneinfo import ZoneInfo

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "recurring")]

from dst_tables import TABLES  # noqa: E402

from wheel_engine.recurring.cron import CronExpression  # noqa: E402

Iterate = Callable[[str, ZoneInfo, dt.datetime], Iterator[dt.datetime]]


def ours(expression: str, tz: ZoneInfo, after: dt.datetime) -> Iterator[dt.datetime]:
    cron = CronExpression(expression, tz)
    t = after.timestamp()
    while True:
        t = cron.next_after(t)
        yield dt.datetime.fromtimestamp(t, dt.UTC)


def cronsim_iterate(expression: str, tz: ZoneInfo, after: dt.datetime) -> Iterator[dt.datetime]:
    from cronsim import CronSim  # type: ignore[import-not-found]

    for moment in CronSim(expression, after.astimezone(tz)):
        yield moment.astimezone(dt.UTC)


def croniter_iterate(expression: str, tz: ZoneInfo, after: dt.datetime) -> Iterator[dt.datetime]:
    from croniter import croniter  # type: ignore[import-not-found]

    it = croniter(expression, after.astimezone(tz))
    while True:
        yield it.get_next(dt.datetime).astimezone(dt.UTC)


def rows_right(iterate: Iterate) -> list[bool]:
    results = []
    for tz, expression, start, end, expected in TABLES:
        begin = dt.datetime.fromisoformat(start.replace("Z", "+00:00")) - dt.timedelta(seconds=1)
        last = dt.datetime.fromisoformat(end.replace("Z", "+00:00"))
        got: list[str] = []
        for moment in iterate(expression, ZoneInfo(tz), begin):
            if moment > last or len(got) > len(expected) + 4:
                break
            got.append(moment.strftime("%Y-%m-%dT%H:%M:%SZ"))
        right = got == list(expected)
        if not right:
            print(f"    {tz} {expression!r} {start[:10]}: got {got}", file=sys.stderr)
        results.append(right)
    return results


def main() -> None:
    contenders: list[tuple[str, Iterate]] = [("wheel_engine.recurring.cron", ours)]
    for module, iterate in (("cronsim", cronsim_iterate), ("croniter", croniter_iterate)):
        if importlib.util.find_spec(module) is not None:
            contenders.append((module, iterate))
        else:
            print(f"{module}: not installed, skipped")
    for name, iterate in contenders:
        print(f"{name}:")
        right = rows_right(iterate)
        print(f"  {sum(right)} of {len(right)} rows right")


if __name__ == "__main__":
    main()
