"""journal.postgres.leases: one owner per partition, fenced by epochs, balanced, handed over."""

from __future__ import annotations

import asyncio
import time

import psycopg
import pytest
from pg_support import db_now, expire_leases, open_store, row_of, sql

from journal.postgres import Outcome, PostgresStore


def owners(url: str) -> dict[int, str | None]:
    return dict(sql(url, "SELECT partition, owner FROM wheel_partitions ORDER BY partition"))


async def test_two_nodes_contending_for_partitions_each_get_disjoint_fair_shares(
    pg_url: str,
) -> None:
    nodes = [await open_store(pg_url, name, partitions=16) for name in ("a", "b")]
    try:
        # Rounds at the same moment: acquirers skip each other's locked rows, never wait.
        for _ in range(3):
            changes = await asyncio.gather(*(store.maintain() for store in nodes))
            a, b = (set(store.leases.owned) for store in nodes)
            assert not a & b
            for store, change in zip(nodes, changes, strict=True):
                await store.release(store.leases.surplus(change.live_nodes))
        a, b = (set(store.leases.owned) for store in nodes)
        assert not a & b
        assert a | b == set(range(16)) and len(a) == len(b) == 8
        table = owners(pg_url)
        assert all(table[p] == "a" for p in a) and all(table[p] == "b" for p in b)
    finally:
        for store in nodes:
            await store.close()
    assert set(owners(pg_url).values()) == {None}  # close() released everything


async def test_a_new_node_gets_its_share_once_the_old_one_releases_its_surplus(
    pg_url: str,
) -> None:
    a = await open_store(pg_url, "a", partitions=8)
    b = await open_store(pg_url, "b", partitions=8)
    try:
        assert len((await a.maintain()).gained) == 8  # alone: everything
        change = await b.maintain()
        assert change.gained == {} and change.live_nodes == 2 and change.fair_share == 4
        surplus = a.leases.surplus((await a.maintain()).live_nodes)
        assert len(surplus) == 4
        assert await a.release(surplus) == sorted(surplus)
        assert set((await b.maintain()).gained) == set(surplus)
        assert len(a.leases.owned) == len(b.leases.owned) == 4
    finally:
        await a.close()
        await b.close()


async def test_renewal_keeps_the_epoch_and_a_lost_partition_is_reported(pg_url: str) -> None:
    a = await open_store(pg_url, "a", partitions=2)
    b = await open_store(pg_url, "b", partitions=2)
    try:
        gained = (await a.maintain()).gained
        again = await a.maintain()
        assert again.gained == {} and again.lost == []
        assert {p: lease.epoch for p, lease in a.leases.owned.items()} == gained
        expire_leases(pg_url, "a")
        assert set((await b.maintain()).gained) == {0, 1}
        assert sorted((await a.maintain()).lost) == [0, 1]
        assert a.leases.owned == {} and not a.leases.usable(0)
    finally:
        await a.close()
        await b.close()


async def test_failover_returns_running_rows_to_pending_with_attempts_kept(pg_url: str) -> None:
    a = await open_store(pg_url, "a", partitions=1)
    b = await open_store(pg_url, "b", partitions=1)
    try:
        await a.maintain()
        past = db_now(pg_url) - 1
        done = await a.schedule_many([a.request(k, "h", past) for k in ("run", "stop", "wait")])
        versions = {d.timer.key: d.timer.version for d in done}
        claims = (await a.attempt([("run", versions["run"]), ("stop", versions["stop"])])).claimed
        assert await a.cancel("stop") == "CANCEL_REQUESTED"
        expire_leases(pg_url, "a")  # a dies with two handlers running
        change = await b.maintain()
        assert change.reset == 2
        run = row_of(pg_url, "run")
        assert (run["state"], run["attempts"], run["due"]) == (0, 1, past)
        assert row_of(pg_url, "stop")["state"] == 3  # the cancel it was asked for stands
        assert row_of(pg_url, "wait")["attempts"] == 0
        # a comes back: every outcome of its old attempts is refused.
        outcomes = [Outcome(c.key, c.version, c.epoch, "SUCCEEDED") for c in claims]
        assert await a.finish(outcomes) == set()
    finally:
        await a.close()
        await b.close()


async def test_an_attempt_racing_a_takeover_waits_for_it_and_then_claims_nothing(
    pg_url: str,
) -> None:
    """The attempt reads its partition FOR SHARE: without that it would read the old epoch
    from its snapshot, claim the row after the taker's reset had looked, and the version
    would run on both nodes."""
    a = await open_store(pg_url, "a", partitions=1)
    try:
        await a.maintain()
        [t] = await a.schedule_many([a.request("k", "h", db_now(pg_url) - 1)])
        async with await psycopg.AsyncConnection.connect(pg_url) as taker:
            await taker.execute(
                "UPDATE wheel_partitions SET owner = 'b', epoch = epoch + 1,"
                " lease_until = extract(epoch FROM now()) + 10"
            )
            racing = asyncio.create_task(a.attempt([("k", t.timer.version)]))
            await asyncio.sleep(0.3)  # let the attempt reach the partition row's lock
            assert not racing.done()
            await taker.commit()
        assert (await racing).claimed == []
        assert row_of(pg_url, "k")["state"] == 0
    finally:
        await a.close()


@pytest.mark.slow
async def test_a_lapsed_lease_is_taken_with_a_higher_epoch_soon_after_it_lapses(
    pg_url: str,
) -> None:
    lease = 1.0
    a = await open_store(pg_url, "a", lease=lease, partitions=4)
    b = await open_store(pg_url, "b", lease=lease, partitions=4)
    try:
        epochs = (await a.maintain()).gained
        (expiry,) = sql(pg_url, "SELECT max(lease_until) FROM wheel_partitions")[0]
        # a stops renewing (paused, cut off). It stops using its leases before they lapse:
        started = time.monotonic()
        while a.held():
            await asyncio.sleep(0.02)
        assert db_now(pg_url) < expiry
        assert time.monotonic() - started < lease
        gained: dict[int, int] = {}
        while len(gained) < 4:
            gained |= (await b.maintain()).gained
            await asyncio.sleep(0.05)
        taken_at = db_now(pg_url)
        assert expiry <= taken_at < expiry + 1.0
        assert all(gained[p] == epochs[p] + 1 for p in epochs)
        assert sorted((await a.maintain()).lost) == [0, 1, 2, 3]
    finally:
        await a.close()
        await b.close()


async def test_a_restarted_node_of_the_same_name_retakes_its_partitions_at_once(
    pg_url: str,
) -> None:
    first = await open_store(pg_url, "a", partitions=2)
    epochs = (await first.maintain()).gained
    second: PostgresStore = await open_store(pg_url, "a", partitions=2)
    try:
        gained = (await second.maintain()).gained
        assert gained == {p: e + 1 for p, e in epochs.items()}  # fenced: the old one is stale
        assert sorted((await first.maintain()).lost) == [0, 1]
    finally:
        await second.close()
        await first.close()


async def test_a_lapsed_lease_is_taken_again_under_a_new_epoch_never_renewed(
    pg_url: str,
) -> None:
    """Issue 21: a node whose leases lapsed in the database (an outage longer than the lease)
    and that nobody took meanwhile must not renew them at the same epoch: the round reports
    them lost, takes them again at epoch + 1, and that take returns its RUNNING rows."""
    store = await open_store(pg_url, "a", partitions=4)
    try:
        await store.maintain()
        before = {p: lease.epoch for p, lease in store.leases.owned.items()}
        await store.schedule_many([store.request("k", "h", db_now(pg_url) - 1)])
        claimed = (await store.attempt([("k", row_of(pg_url, "k")["version"])])).claimed
        assert [c.key for c in claimed] == ["k"]
        expire_leases(pg_url, "a")  # lapsed in the database; "a" still believes it holds them
        change = await store.maintain()
        assert sorted(change.lost) == sorted(before)
        assert change.gained == {p: e + 1 for p, e in before.items()}
        assert change.reset == 1
        row = row_of(pg_url, "k")
        assert (row["state"], row["attempts"]) == (0, 1)  # PENDING again, its attempt kept
        partition = store.partition_of("k")
        assert store.leases.lapsed(partition, before[partition])
        assert store.leases.usable_at(partition, before[partition] + 1)
        assert not store.leases.usable_at(partition, before[partition])
    finally:
        await store.close()
