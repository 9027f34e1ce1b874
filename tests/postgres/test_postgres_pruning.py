"""journal.postgres.pruning: finished rows go after retention, in bounded steps, by the owner."""

from __future__ import annotations

from pg_support import balance, db_now, open_store, sql

from journal.postgres import Outcome


async def test_finished_rows_are_pruned_after_retention_in_bounded_steps(pg_url: str) -> None:
    s = await open_store(pg_url, "a", partitions=2)
    other = await open_store(pg_url, "b", partitions=2)
    try:
        await balance(s, other)  # one partition each
        past = db_now(pg_url) - 1
        keys = [f"k{i}" for i in range(60)]
        done = await s.schedule_many([s.request(k, "h", past) for k in keys])
        claims = (await s.attempt([(d.timer.key, d.timer.version) for d in done])).claimed
        mine = {c.key for c in claims}
        assert mine and len(mine) < len(keys)  # only the partition s holds
        outcome = {0: "SUCCEEDED", 1: "CANCELED", 2: "DEAD"}
        await s.finish(
            [Outcome(c.key, c.version, c.epoch, outcome[i % 3]) for i, c in enumerate(claims)]
        )
        assert await s.prune(retention=3600.0) == 0  # still within the window
        sql(pg_url, "UPDATE wheel_timers SET finished_at = finished_at - 7200")
        finished = sum(1 for i in range(len(claims)) if i % 3 != 2)
        assert await s.prune(retention=3600.0, limit=5) == 5
        assert await s.prune(retention=3600.0) == finished - 5
        assert await s.prune(retention=3600.0) == 0
        states = dict(sql(pg_url, "SELECT state, count(*) FROM wheel_timers GROUP BY state"))
        assert states == {0: len(keys) - len(mine), 4: len(claims) - finished}
    finally:
        await s.close()
        await other.close()
