"""journal.postgres.repartition: a schema-2 journal's recurrence rows move to their name's
partition once, the rest stay, the partitions they left or entered change hands."""

from __future__ import annotations

import asyncio
import itertools
import math
import time
import zlib
from typing import Any

import msgpack
from pg_support import db_now, open_store, row_of, sql

from journal.postgres import SCHEMA_VERSION, PostgresClient, partition_of
from journal.postgres.schema import MIGRATIONS, _initial_rows
from journal.postgres.states import PENDING_CODE, RUNNING_CODE, SUCCEEDED_CODE
from wheel_engine import Engine
from wheel_engine.recurring.records import (
    DORMANT_DUE,
    RULE_HANDLER,
    encode_rule,
    occurrence_handler,
    rule_key,
)
from wheel_engine.recurring.rule import EveryRule, occurrence_key, occurrence_of

PARTITIONS = 8
NAME = "sweep"


def old_partition(key: str) -> int:
    """Where wheel-engine placed every key up to schema 2: its own CRC-32."""
    return zlib.crc32(key.encode("utf-8")) % PARTITIONS


def schema_two(url: str) -> None:
    """The database as wheel-engine wrote it before recurrences partitioned by name."""
    for ddl in MIGRATIONS[0]:
        sql(url, str(ddl))
    for statement, params in _initial_rows(PARTITIONS):
        sql(url, statement, params)
    for ddl in MIGRATIONS[1]:
        sql(url, str(ddl))
    sql(url, "UPDATE wheel_meta SET value = 2 WHERE name = 'schema_version'")


def old_row(
    url: str,
    key: str,
    state: int,
    run_epoch: int | None = None,
    *,
    handler: str = "h",
    due: float | None = None,
    payload: bytes | None = None,
) -> None:
    """A timer as schema 2's code wrote it: in the partition of its key's own CRC-32."""
    at = db_now(url) + 3600 if due is None else due
    sql(
        url,
        "INSERT INTO wheel_timers (key, partition, version, handler, due, payload, state,"
        " run_epoch) VALUES (%s, %s, nextval('wheel_version_seq'), %s, %s, %s, %s, %s)",
        (key, old_partition(key), handler, at, payload, state, run_epoch),
    )


def moving_occurrences(count: int) -> list[str]:
    """Occurrence keys of NAME that the old rule placed elsewhere than NAME's partition."""
    home = old_partition(NAME)
    keys = [f"{NAME}@2026-12-03T08:{minute:02d}:00Z" for minute in range(60)]
    return [key for key in keys if old_partition(key) != home][:count]


def partitions_of(url: str) -> dict[str, int]:
    return dict(sql(url, "SELECT key, partition FROM wheel_timers"))  # type: ignore[arg-type]


def owners(url: str) -> dict[int, Any]:
    return dict(sql(url, "SELECT partition, owner FROM wheel_partitions"))  # type: ignore[arg-type]


async def test_a_schema_two_journal_moves_its_recurrences_rows_once(pg_url: str) -> None:
    schema_two(pg_url)
    running, pending, done = moving_occurrences(3)
    others = ["user@example.com", "order-17", "a@b@rule", f"{NAME}@2026-12-03T08:00:00"]
    old_row(pg_url, f"{NAME}@rule", PENDING_CODE)
    old_row(pg_url, running, RUNNING_CODE, run_epoch=5)
    old_row(pg_url, pending, PENDING_CODE)
    old_row(pg_url, done, SUCCEEDED_CODE)
    for key in others:
        old_row(pg_url, key, PENDING_CODE)
    before = partitions_of(pg_url)
    home = old_partition(NAME)
    touched = {home} | {before[key] for key in (running, pending, done, f"{NAME}@rule")}
    untouched = min(set(range(PARTITIONS)) - touched)
    # an older node holds every partition, under epoch 5, with a lease an hour long
    sql(
        pg_url,
        "UPDATE wheel_partitions SET owner = 'old', epoch = 5, lease_until = %s",
        (db_now(pg_url) + 3600,),
    )

    with PostgresClient.connect(pg_url) as client:  # before: each row is where schema 2 puts it
        assert client.check().problems == [
            f"schema_version 2, this release reads {SCHEMA_VERSION}: "
            "start a node of this release to migrate it"
        ]
    store = await open_store(pg_url, "new", partitions=None)  # migrates
    try:
        assert sql(pg_url, "SELECT value FROM wheel_meta WHERE name = 'schema_version'") == [
            (SCHEMA_VERSION,)
        ]
        after = partitions_of(pg_url)
        for key in (f"{NAME}@rule", running, pending, done):
            assert after[key] == home == partition_of(key, PARTITIONS), key
        assert {key: after[key] for key in others} == {key: before[key] for key in others}
        assert all(after[key] == partition_of(key, PARTITIONS) for key in after)
        held = owners(pg_url)
        assert {p for p, owner in held.items() if owner is None} == touched
        assert held[untouched] == "old"  # no row left or entered it: its owner keeps it
        moved = row_of(pg_url, running)
        assert (moved["state"], moved["run_epoch"]) == (RUNNING_CODE, 0)
        with PostgresClient.connect(pg_url) as client:
            report = client.check()
        assert report.ok, report.problems

        await store.maintain()  # takes the released partitions: its reset requeues the run
        assert row_of(pg_url, running)["state"] == PENDING_CODE
        assert row_of(pg_url, done)["state"] == SUCCEEDED_CODE
    finally:
        await store.close()

    again = await open_store(pg_url, "later", partitions=None)  # migrated once: nothing moves
    await again.close()
    assert partitions_of(pg_url) == after


async def test_an_engine_opening_a_schema_two_journal_goes_on_with_its_recurrence(
    pg_url: str,
) -> None:
    """A recurrence written by schema 2's code, its record and pending occurrence each in its
    own key's partition: a node of this code migrates, fires that occurrence, and the series
    goes on from it, every step, none early."""
    schema_two(pg_url)
    anchor = math.ceil(db_now(pg_url)) + 2.0
    name = next(
        f"sweep{i}"
        for i in itertools.count()
        if old_partition(f"sweep{i}") != old_partition(rule_key(f"sweep{i}"))
        and old_partition(f"sweep{i}") != old_partition(occurrence_key(f"sweep{i}", anchor))
    )
    fields = encode_rule(EveryRule(0.25, anchor), "sweep", None, "latest", False, anchor)
    old_row(
        pg_url,
        rule_key(name),
        PENDING_CODE,
        due=DORMANT_DUE,
        handler=RULE_HANDLER,
        payload=msgpack.packb(fields),
    )
    first = occurrence_key(name, anchor)
    old_row(pg_url, first, PENDING_CODE, due=anchor, handler=occurrence_handler("sweep"))
    fired: list[tuple[str, float]] = []
    engine = Engine(pg_url, node="a", lease=1.5, horizon=60.0)
    engine.register("sweep", lambda firing: fired.append((firing.key, time.time())))
    async with engine:
        deadline = time.monotonic() + 20
        while len(fired) < 4:
            assert time.monotonic() < deadline, f"fired only {fired}"
            await asyncio.sleep(0.02)
        assert await engine.cancel_recurring(name)
    assert fired[0][0] == first
    nominals = [occurrence_of(key)[1] for key, _ in fired]  # type: ignore[index]
    assert nominals == [anchor + 0.25 * i for i in range(len(fired))]
    assert all(at >= nominal for (_, at), nominal in zip(fired, nominals, strict=True))
    assert all(
        partition == partition_of(name, PARTITIONS)
        for key, partition in partitions_of(pg_url).items()
        if key.startswith(name)
    )
