"""journal.postgres.pruning with ``max_retained``: the newest finished rows of the whole journal
are kept, the rest go oldest first by (finished_at, key), each owner pruning only its own
partitions under its current epoch, a bounded batch at a time."""

from __future__ import annotations

import pytest
from pg_support import balance, db_now, expire_leases, open_store, sql

from journal.postgres import Outcome, PostgresStore, pruning
from journal.state import TimerState


async def finish_all(
    store: PostgresStore, keys: list[str], state: TimerState = TimerState.SUCCEEDED
) -> set[str]:
    """Schedule ``keys`` overdue, then finish those in ``store``'s partitions."""
    await store.schedule_many([store.request(k, "h", db_now(store.url) - 1) for k in keys])
    return await finish_mine(store, keys, state)


async def finish_mine(
    store: PostgresStore, keys: list[str], state: TimerState = TimerState.SUCCEEDED
) -> set[str]:
    """Claim the pending ``keys`` of ``store``'s partitions and finish them as ``state``."""
    rows = sql(store.url, "SELECT key, version FROM wheel_timers WHERE key = ANY(%s)", (keys,))
    claims = (await store.attempt([(k, v) for k, v in rows])).claimed
    await store.finish([Outcome(c.key, c.version, c.epoch, state) for c in claims])
    return {c.key for c in claims}


def set_finished_at(url: str, ages: dict[str, float]) -> None:
    """Give rows chosen finish times (seconds before now): the order the bound goes by."""
    for key, age in ages.items():
        sql(
            url,
            "UPDATE wheel_timers SET finished_at = extract(epoch FROM now()) - %s WHERE key = %s",
            (age, key),
        )


def keys_left(url: str) -> set[str]:
    return {key for (key,) in sql(url, "SELECT key FROM wheel_timers")}


async def test_the_newest_max_retained_stay_and_the_oldest_go_first_by_finish_time_and_key(
    pg_url: str,
) -> None:
    s = await open_store(pg_url, "a", partitions=2)
    try:
        await s.maintain()
        keys = [f"k{i}" for i in range(10)]
        assert await finish_all(s, keys) == set(keys)
        # k0 oldest ... k9 newest; k4 and k5 finished at the same moment: the key breaks the tie.
        ages = {k: 100.0 - 10 * i for i, k in enumerate(keys)}
        ages["k5"] = ages["k4"]
        set_finished_at(pg_url, ages)
        assert await s.prune(retention=3600.0, max_retained=10) == 0  # all fit
        assert await s.prune(retention=3600.0, max_retained=5) == 5
        assert keys_left(pg_url) == {"k5", "k6", "k7", "k8", "k9"}  # k4 < k5 at one time
        assert await s.prune(retention=3600.0, max_retained=5) == 0  # nothing more to do
        # retention still applies within the kept ones: k5 (age 60) goes, k6 (50) stays.
        assert await s.prune(retention=55.0, max_retained=5) == 1
        assert keys_left(pg_url) == {"k6", "k7", "k8", "k9"}
    finally:
        await s.close()


async def test_max_retained_zero_keeps_no_finished_row_and_never_touches_live_or_dead_ones(
    pg_url: str,
) -> None:
    s = await open_store(pg_url, "a", partitions=1)
    try:
        await s.maintain()
        await finish_all(s, ["ok1", "ok2"])
        await finish_all(s, ["gone1"], TimerState.CANCELED)
        await finish_all(s, ["dead1"], TimerState.DEAD)
        await s.schedule_many([s.request("later", "h", db_now(pg_url) + 3600)])
        [running] = await s.schedule_many([s.request("run", "h", db_now(pg_url) - 1)])
        assert (await s.attempt([("run", running.timer.version)])).claimed
        assert await s.prune(retention=3600.0, max_retained=0) == 3
        assert keys_left(pg_url) == {"dead1", "later", "run"}
    finally:
        await s.close()


async def test_the_bound_is_over_the_journal_and_each_owner_prunes_only_its_own_partitions(
    pg_url: str,
) -> None:
    a = await open_store(pg_url, "a", partitions=2)
    b = await open_store(pg_url, "b", partitions=2)
    try:
        await balance(a, b)  # one partition each
        keys = [f"k{i}" for i in range(40)]
        mine_a = await finish_all(a, keys)
        mine_b = await finish_mine(b, keys)
        assert mine_a and mine_b and mine_a | mine_b == set(keys) and not mine_a & mine_b
        set_finished_at(pg_url, {k: 1000.0 - i for i, k in enumerate(keys)})  # k39 newest
        newest = set(keys[-10:])
        # a deletes its rows below the journal-wide cut, and none of b's.
        deleted_a = await a.prune(retention=3600.0, max_retained=10)
        assert deleted_a == len(mine_a - newest)
        assert keys_left(pg_url) == newest | mine_b
        # b, pruning with the same bound, brings the journal down to exactly the newest 10.
        assert await b.prune(retention=3600.0, max_retained=10) == len(mine_b - newest)
        assert keys_left(pg_url) == newest
    finally:
        await a.close()
        await b.close()


async def test_a_node_whose_partition_was_taken_over_prunes_nothing_there(pg_url: str) -> None:
    a = await open_store(pg_url, "a", partitions=1)
    b = await open_store(pg_url, "b", partitions=1)
    try:
        await a.maintain()
        await finish_all(a, [f"k{i}" for i in range(5)])
        stale = [(p, lease.epoch) for p, lease in a.leases.owned.items()]
        expire_leases(pg_url, "a")
        assert (await b.maintain()).gained  # b holds the partition at a higher epoch now
        async with a._pool.connection() as conn:  # a still believes in its old epoch
            assert await pruning.prune(conn, "a", stale, retention=0.0, max_retained=0) == 0
        assert len(keys_left(pg_url)) == 5
        assert await b.prune(retention=3600.0, max_retained=0) == 5
    finally:
        await a.close()
        await b.close()


async def test_a_backlog_beyond_max_retained_goes_in_bounded_steps_oldest_first(
    pg_url: str,
) -> None:
    s = await open_store(pg_url, "a", partitions=4)
    try:
        await s.maintain()
        keys = [f"k{i:02}" for i in range(30)]
        await finish_all(s, keys)
        set_finished_at(pg_url, {k: 100.0 - i for i, k in enumerate(keys)})
        assert await s.prune(retention=3600.0, max_retained=6, limit=10) == 10
        assert keys_left(pg_url) == set(keys[10:])  # the ten oldest went first
        assert await s.prune(retention=3600.0, max_retained=6, limit=10) == 10
        assert await s.prune(retention=3600.0, max_retained=6, limit=10) == 4
        assert keys_left(pg_url) == set(keys[-6:])
    finally:
        await s.close()


async def test_the_cut_walks_the_finished_index_not_the_table(pg_url: str) -> None:
    """Both the cut and the candidates are read through the partial index on finished_at, so
    a prune costs what it deletes plus ``max_retained`` index entries, not a table scan."""
    s = await open_store(pg_url, "a", partitions=1)
    try:
        await s.maintain()
        rows = 20_000
        sql(
            pg_url,
            "INSERT INTO wheel_timers (key, partition, version, handler, due, state,"
            " finished_at) SELECT 'p' || i, 0, i, 'h', 0, CASE WHEN i %% 10 = 0 THEN 2 ELSE 0 END,"
            " CASE WHEN i %% 10 = 0 THEN i END FROM generate_series(1, %s) AS i",
            (rows,),
        )
        sql(pg_url, "ANALYZE wheel_timers")
        [(epoch,)] = sql(pg_url, "SELECT epoch FROM wheel_partitions")
        params = {"node": "a", "parts": [0], "epochs": [epoch], "retention": 3600.0}
        params |= {"max_retained": 100, "limit": 50}
        explained = sql(pg_url, "EXPLAIN " + pruning._PRUNE_BOTH, params)
        plan = "\n".join(line for (line,) in explained)
        assert "wheel_timers_finished" in plan, plan
        assert "Seq Scan on wheel_timers" not in plan, plan
        assert await s.prune(retention=1e9, max_retained=100, limit=50) == 50
    finally:
        await s.close()


@pytest.mark.parametrize("bad", [-1, 1.5, True, "3"])
async def test_a_bad_max_retained_raises_before_anything_is_deleted(
    pg_url: str, bad: object
) -> None:
    s = await open_store(pg_url, "a", partitions=1)
    try:
        await s.maintain()
        await finish_all(s, ["k"])
        with pytest.raises(ValueError, match="max_retained"):
            await s.prune(retention=0.0, max_retained=bad)  # type: ignore[arg-type]
        assert keys_left(pg_url) == {"k"}
    finally:
        await s.close()
