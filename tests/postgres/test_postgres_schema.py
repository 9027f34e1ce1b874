"""journal.postgres.schema: created once, upgraded by number, a newer one refused untouched."""

from __future__ import annotations

import asyncio

import pytest
from pg_support import open_store, sql

from journal.errors import JournalError
from journal.postgres import DEFAULT_PARTITIONS, SCHEMA_VERSION, PostgresClient


async def test_nodes_starting_together_create_one_schema(pg_url: str) -> None:
    stores = await asyncio.gather(*(open_store(pg_url, f"n{i}", partitions=None) for i in range(4)))
    try:
        assert {s.partitions for s in stores} == {DEFAULT_PARTITIONS}
        meta = dict(sql(pg_url, "SELECT name, value FROM wheel_meta"))
        assert meta == {"schema_version": SCHEMA_VERSION, "partitions": DEFAULT_PARTITIONS}
        count = sql(pg_url, "SELECT count(*), min(partition), max(partition) FROM wheel_partitions")
        assert count == [(DEFAULT_PARTITIONS, 0, DEFAULT_PARTITIONS - 1)]
    finally:
        for s in stores:
            await s.close()


async def test_the_partition_count_is_fixed_at_creation(pg_url: str) -> None:
    first = await open_store(pg_url, "a", partitions=16)
    await first.close()
    again = await open_store(pg_url, "b", partitions=None)
    assert again.partitions == 16
    await again.close()
    with pytest.raises(JournalError, match="16 partitions"):
        await open_store(pg_url, "c", partitions=32)


async def test_a_new_journal_needs_a_sensible_partition_count(pg_url: str) -> None:
    with pytest.raises(ValueError, match="partitions"):
        await open_store(pg_url, "a", partitions=0)
    assert sql(pg_url, "SELECT to_regclass('wheel_meta') IS NULL") == [(True,)]


async def test_a_missing_database_fails_at_once_naming_it(pg_url: str) -> None:
    with pytest.raises(JournalError, match="does not exist"):
        await open_store(pg_url + "_missing", "a")


async def test_a_newer_schema_is_refused_and_left_as_it_was(pg_url: str) -> None:
    s = await open_store(pg_url, "a")
    await s.close()
    sql(pg_url, "UPDATE wheel_meta SET value = %s WHERE name = 'schema_version'", (99,))
    with pytest.raises(JournalError, match="newer wheel-engine"):
        await open_store(pg_url, "a")
    with pytest.raises(JournalError, match="newer wheel-engine"):
        PostgresClient.connect(pg_url)
    assert sql(pg_url, "SELECT value FROM wheel_meta WHERE name = 'schema_version'") == [(99,)]


def test_the_cli_client_never_creates_a_journal(pg_url: str) -> None:
    with pytest.raises(JournalError, match="not a wheel-engine journal"):
        PostgresClient.connect(pg_url)
    assert sql(pg_url, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'") == [(0,)]


def test_an_unreachable_server_is_one_clear_error_without_the_password() -> None:
    url = "postgresql://u:secret@127.0.0.1:1/nothing?connect_timeout=2"
    with pytest.raises(JournalError) as info:
        PostgresClient.connect(url)
    assert "127.0.0.1:1/nothing" in str(info.value) and "secret" not in str(info.value)


async def test_bad_arguments_raise_before_anything_is_created(pg_url: str) -> None:
    for bad in ({"lease": 0.0}, {"lease": float("nan")}, {"horizon": -1.0}, {"node": ""}):
        kw = {"node": "a", **bad}
        with pytest.raises(ValueError):
            await open_store(pg_url, **kw)  # type: ignore[arg-type]
    assert sql(pg_url, "SELECT to_regclass('wheel_meta') IS NULL") == [(True,)]
