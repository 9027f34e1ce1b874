"""journal.postgres.feed: every committed change of a held partition reaches its owner."""

from __future__ import annotations

import asyncio

import psycopg
from pg_support import db_now, open_store

from journal.postgres import PostgresStore


async def test_changes_from_any_node_reach_the_owner_of_the_partition(pg_url: str) -> None:
    owner = await open_store(pg_url, "owner", partitions=1)
    other = await open_store(pg_url, "other", partitions=1)
    try:
        await owner.maintain()
        await owner.start_feed()
        assert await owner.changes() == []
        [t] = await other.schedule_many([other.request("k", "h", db_now(pg_url) + 60)])
        [seen] = await owner.changes()
        assert (seen.key, seen.version, seen.state) == ("k", t.timer.version, "PENDING")
        assert await other.cancel("k") == "CANCELED"
        assert [(r.key, r.state) for r in await owner.changes()] == [("k", "CANCELED")]
        assert await other.changes() == []  # holds no partition: sees nothing
    finally:
        await owner.close()
        await other.close()


async def test_a_change_that_commits_after_a_later_one_was_read_is_not_skipped(
    pg_url: str,
) -> None:
    """Why the cursor is a transaction id, not ``change_seq``: the slow transaction stamps
    its row with a lower change_seq than the fast one, and commits after the fast one was
    read. A cursor ``change_seq > last seen`` would skip it for good."""
    s = await open_store(pg_url, "a", partitions=1)
    try:
        await s.maintain()
        await s.start_feed()
        async with await psycopg.AsyncConnection.connect(pg_url) as slow:
            await slow.execute(
                "INSERT INTO wheel_timers (key, partition, version, handler, due, state)"
                " VALUES ('slow', 0, nextval('wheel_version_seq'), 'h', 1, 0)"
            )
            await s.schedule_many([s.request("fast", "h", 2.0)])
            assert [r.key for r in await s.changes()] == ["fast"]
            await slow.commit()
        later = {r.key: r.change_seq for r in await s.changes()}
        assert "slow" in later
        fast = (await s.lookup("fast")).change_seq  # type: ignore[union-attr]
        assert later["slow"] < fast  # the premise: it was stamped first, committed last
    finally:
        await s.close()


async def test_notify_wakes_the_listener_early_and_polling_works_without_it(
    pg_url: str,
) -> None:
    listening: PostgresStore = await open_store(pg_url, "a", partitions=4, listen=True)
    deaf = await open_store(pg_url, "b", partitions=4)
    try:
        await listening.wait(5.0)  # the first wake says "listening now: look"
        key = "k"
        asyncio.get_running_loop().call_later(
            0.2, lambda: asyncio.ensure_future(deaf.schedule_many([deaf.request(key, "h", 1.0)]))
        )
        assert await listening.wait(10.0)
        assert listening.listener.woken == {listening.partition_of(key)}
        assert await deaf.wait(0.05) is False  # no listener: a plain timeout
    finally:
        await listening.close()
        await deaf.close()
