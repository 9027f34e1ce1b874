"""One engine on PostgreSQL: the same public API as on SQLite, through the database."""

from __future__ import annotations

import time

from node_support import engine, sql, until

from wheel_engine import Firing, TimerState


async def test_a_timer_is_scheduled_and_fires_through_the_database(pg_url: str) -> None:
    fired: list[tuple[str, float]] = []
    e = engine(pg_url, "a")

    @e.handler("h")
    async def h(firing: Firing) -> None:
        fired.append((firing.key, time.time()))

    async with e:
        info = await e.schedule("h", delay=0.2, key="k1", payload={"n": 1})
        assert info.state is TimerState.PENDING and info.payload == {"n": 1}
        await until(lambda: bool(fired))
        assert fired[0][0] == "k1" and fired[0][1] >= info.due
        await until(lambda: sql(pg_url, "SELECT state FROM wheel_timers")[0][0] == 2)
        looked = await e.lookup("k1")
        assert looked is not None and looked.state is TimerState.SUCCEEDED
        assert looked.attempts == 1 and looked.version == info.version
        stats = e.stats()
        assert stats["node"] == "a" and len(stats["partitions"]) == 64
    assert sql(pg_url, "SELECT count(*) FROM wheel_partitions WHERE owner IS NOT NULL") == [(0,)]
