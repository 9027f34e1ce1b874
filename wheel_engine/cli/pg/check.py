"""``check`` on a PostgreSQL journal: the schema and every row, read-only.

What is checked is :mod:`journal.postgres.checking`'s list (schema version, partitions,
every row decodes, versions unique and issued, running epochs fenced). Exit 1 with the
problems found (the first on stderr as the error, the others after it), 0 when there are none.
"""

from __future__ import annotations

import argparse

from wheel_engine.cli.output import EXIT_OK, EXIT_PROBLEM, Output
from wheel_engine.cli.pg import mask_url
from wheel_engine.cli.pg.connection import connected, guarded

__all__ = ["cmd_check"]


@guarded
def cmd_check(args: argparse.Namespace, out: Output) -> int:
    shown = mask_url(args.db)
    with connected(args.db) as client, out.progress(f"checking {shown}"):
        report = client.check()
    data = {
        "journal": shown,
        "ok": report.ok,
        "backend": "postgresql",
        "schema_version": report.schema_version,
        "partitions": report.partitions,
        "timers": report.timers,
        "max_version": report.last_version,
        "problems": report.problems,
    }
    if out.json_mode:
        out.json(data)
    elif report.ok:
        out.line(
            f"ok: {report.timers} timers decode; schema_version {report.schema_version}, "
            f"{report.partitions} partitions, versions unique and issued "
            f"(<= {report.last_version}), running epochs fenced"
        )
    else:
        out.error(f"{shown}: {report.problems[0]}")
        for more in report.problems[1:]:
            out.note(f"  also: {more}")
    return EXIT_OK if report.ok else EXIT_PROBLEM
