"""``check`` for a PostgreSQL journal: is every row one this code can read and fire correctly?

What is checked, in one read-only REPEATABLE READ transaction (one snapshot for every step):

- the schema version is the one this code writes (older: a node must migrate it first);
- ``wheel_partitions`` holds exactly the partitions ``0 .. P-1`` the journal was created with;
- every timer row decodes: a known state code, a non-empty handler, a payload that is msgpack
  (or none), its partition in range and the one ``partition_of`` gives its key (a row in
  another partition would be fired by the wrong owner; a recurrence's rows are let be in a
  journal its migration has not yet placed by name);
- versions are unique and at most the version sequence's last value (read after the snapshot,
  so a version committed meanwhile cannot look too new);
- a RUNNING row carries an epoch, and not one above its partition's epoch (an epoch only comes
  from owning the partition, so a higher one means the fencing token went backwards).

Not checked: PostgreSQL's own storage (pages, indexes): that is the server's job
(``amcheck``, ``pg_dump``). The snapshot is held for the whole check, which holds the change
feed's cursor back meanwhile: nodes re-read the changes made during the check, nothing more.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final, NamedTuple

import msgpack
from psycopg import Connection

from journal.postgres.inspection import last_version_sync, schema_version_sync
from journal.postgres.partitioning import partition_of, recurrence_name
from journal.postgres.schema import RECURRENCES_BY_NAME_SINCE, SCHEMA_VERSION
from journal.postgres.states import RUNNING_CODE
from journal.state import STATES

__all__ = ["CheckReport", "check_sync"]

#: Problems reported at most: past this many the journal is clearly damaged, and a list of
#: thousands would hide the first ones.
MAX_PROBLEMS: Final = 50
#: Rows fetched per round trip while decoding every timer.
_PAGE: Final = 2000

_ROWS: Final = "SELECT key, version, handler, state, payload, partition FROM wheel_timers"
_DUPLICATES: Final = (
    "SELECT version, array_agg(key ORDER BY key) FROM wheel_timers"
    " GROUP BY version HAVING count(*) > 1 ORDER BY version LIMIT %s"
)
_EPOCHS: Final = (
    "SELECT t.key, t.run_epoch, p.epoch FROM wheel_timers t"
    " LEFT JOIN wheel_partitions p ON p.partition = t.partition"
    f" WHERE t.state = {RUNNING_CODE}"
    " AND (t.run_epoch IS NULL OR p.epoch IS NULL OR t.run_epoch > p.epoch)"
    " ORDER BY t.key LIMIT %s"
)
_PARTITION_IDS: Final = "SELECT partition FROM wheel_partitions ORDER BY partition"


class CheckReport(NamedTuple):
    ok: bool
    schema_version: int
    partitions: int
    timers: int  #: rows read (every one was decoded)
    last_version: int  #: the version sequence's last value (0 before the first)
    problems: list[str]  #: at most :data:`MAX_PROBLEMS`, most fundamental first


class _Problems:
    """The problems found so far, capped at :data:`MAX_PROBLEMS`."""

    def __init__(self) -> None:
        self.found: list[str] = []

    def add(self, problem: str) -> None:
        if len(self.found) < MAX_PROBLEMS:
            self.found.append(problem)


def check_sync(conn: Connection[Any], partitions: int) -> CheckReport:
    """Check the journal (``partitions``: its stored partition count); never writes."""
    problems = _Problems()
    with conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        schema = schema_version_sync(conn)  # the first statement takes the snapshot
        if schema != SCHEMA_VERSION:
            problems.add(
                f"schema_version {schema}, this release reads {SCHEMA_VERSION}: "
                "start a node of this release to migrate it"
            )
        last_version = last_version_sync(conn)
        _check_partition_table(conn, partitions, problems)
        timers = 0
        by_name = schema >= RECURRENCES_BY_NAME_SINCE
        for row in _rows(conn):
            timers += 1
            _check_row(row, partitions, last_version, by_name, problems)
        _check_versions_unique(conn, problems)
        _check_epochs(conn, problems)
    return CheckReport(not problems.found, schema, partitions, timers, last_version, problems.found)


def _rows(conn: Connection[Any]) -> Iterator[tuple[Any, ...]]:
    """Every timer row, a page at a time through a server-side cursor."""
    with conn.cursor(name="wheel_check") as cur:
        cur.itersize = _PAGE
        cur.execute(_ROWS)
        yield from cur


def _check_partition_table(conn: Connection[Any], partitions: int, problems: _Problems) -> None:
    found = [row[0] for row in conn.execute(_PARTITION_IDS).fetchall()]
    if found != list(range(partitions)):
        missing = sorted(set(range(partitions)) - set(found))
        extra = sorted(set(found) - set(range(partitions)))
        problems.add(
            f"wheel_partitions does not hold partitions 0..{partitions - 1} exactly "
            f"(missing {missing[:10]}, unexpected {extra[:10]})"
        )


def _check_row(
    row: tuple[Any, ...], partitions: int, last: int, by_name: bool, problems: _Problems
) -> None:
    """``by_name``: the schema places a recurrence's keys by its name (before that migration
    they hash by themselves, and the migration settles them, so they are not findings)."""
    key, version, handler, state, payload, partition = row
    if not 0 <= state < len(STATES):
        problems.add(f"timer {key!r}: unknown state code {state}")
    if not handler:
        problems.add(f"timer {key!r}: empty handler name")
    if payload is not None:
        try:
            msgpack.unpackb(bytes(payload), raw=False, strict_map_key=False)
        except Exception:  # any decoding failure is the finding itself
            problems.add(f"timer {key!r}: payload is not valid msgpack")
    if not 0 <= partition < partitions:
        problems.add(f"timer {key!r}: partition {partition} out of range 0..{partitions - 1}")
    elif partition != partition_of(key, partitions) and (by_name or not recurrence_name(key)):
        problems.add(
            f"timer {key!r}: in partition {partition}, but its key hashes to "
            f"{partition_of(key, partitions)}"
        )
    if not 1 <= version <= last:
        problems.add(f"timer {key!r}: version {version} outside 1..{last} (the sequence's last)")


def _check_versions_unique(conn: Connection[Any], problems: _Problems) -> None:
    for version, keys in conn.execute(_DUPLICATES, (MAX_PROBLEMS,)).fetchall():
        problems.add(f"version {version} is held by several timers: {', '.join(map(repr, keys))}")


def _check_epochs(conn: Connection[Any], problems: _Problems) -> None:
    for key, run_epoch, epoch in conn.execute(_EPOCHS, (MAX_PROBLEMS,)).fetchall():
        if run_epoch is None:
            problems.add(f"timer {key!r}: RUNNING without the epoch of its attempt")
        elif epoch is None:
            problems.add(f"timer {key!r}: RUNNING in a partition wheel_partitions lacks")
        else:
            problems.add(
                f"timer {key!r}: RUNNING under epoch {run_epoch}, above its partition's "
                f"epoch {epoch}"
            )
