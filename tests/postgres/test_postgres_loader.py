"""journal.postgres.loader: the owner's horizon, keyset-paged in (due, version) order."""

from __future__ import annotations

from pg_support import balance, db_now, open_store

from journal.postgres import loader


async def test_refill_loads_held_pending_timers_within_the_horizon_in_order(pg_url: str) -> None:
    s = await open_store(pg_url, "a", horizon=100.0)
    try:
        await s.maintain()
        now = db_now(pg_url)
        n = 2 * loader.PAGE + 17  # several pages
        requests = [s.request(f"k{i}", "h", now + (i * 7919 % n) / n * 50) for i in range(n)]
        requests += [s.request("late", "h", now + 1000.0), s.request("gone", "h", now)]
        await s.schedule_many(requests)
        await s.cancel("gone")
        rows = await s.refill()
        assert len(rows) == n and len({r.key for r in rows}) == n
        assert [(r.due, r.version) for r in rows] == sorted((r.due, r.version) for r in rows)
        assert all(r.state == "PENDING" for r in rows)
        assert s.horizon.through[0] >= now + 100.0
        assert await s.refill() == []  # nothing new within the horizon
        s.horizon.horizon = 2000.0  # time moved on, as far as the loader can tell
        assert [r.key for r in await s.refill()] == ["late"]
    finally:
        await s.close()


async def test_a_row_budget_cuts_a_refill_short_and_the_next_one_reads_on(pg_url: str) -> None:
    s = await open_store(pg_url, "a")
    try:
        await s.maintain()
        s.horizon.max_rows = 10
        now = db_now(pg_url)
        await s.schedule_many([s.request(f"k{i:02}", "h", now + i) for i in range(25)])
        got = [r.key for r in await s.refill()]
        assert got == [f"k{i:02}" for i in range(10)]
        assert s.horizon.through[0] == now + 9 and s.horizon.covers(now + 9, 0)
        assert not s.horizon.covers(now + 10, 0)
        got += [r.key for r in await s.refill()]
        got += [r.key for r in await s.refill()]
        assert got == [f"k{i:02}" for i in range(25)]
    finally:
        await s.close()


async def test_a_gained_partition_catches_up_to_what_the_others_loaded(pg_url: str) -> None:
    a = await open_store(pg_url, "a", partitions=2)
    b = await open_store(pg_url, "b", partitions=2)
    try:
        await balance(a, b)  # one partition each
        (mine,) = a.leases.owned
        now = db_now(pg_url)
        keys = [f"k{i}" for i in range(40)]
        await a.schedule_many([a.request(k, "h", now + i) for i, k in enumerate(keys)])
        first = await a.refill()
        assert {r.partition for r in first} == {mine}
        await b.close()  # leaves: its partition is free and a is alone
        gained = (await a.maintain()).gained
        assert set(gained) == {1 - mine}
        caught = await a.catch_up(list(gained))
        assert {r.key for r in first} | {r.key for r in caught} == set(keys)
        assert await a.refill() == []
    finally:
        await a.close()
        await b.close()


async def test_a_capped_handler_is_read_a_slice_at_a_time_and_never_holds_the_others_back(
    pg_url: str,
) -> None:
    """A limited handler's backlog due at once (issue 26): its rows come ``room`` at a time on a
    cursor of their own, and the other handlers' rows due after it are read at once."""
    s = await open_store(pg_url, "a", horizon=100.0)
    try:
        await s.maintain()
        s.horizon.max_rows = 30
        s.horizon.cap({"a"})
        room = {"a": 10}
        s.horizon.room = lambda handler: room[handler]
        now = db_now(pg_url) - 5.0  # all overdue
        backlog = [s.request(f"a{i:02}", "a", now + i / 100) for i in range(50)]
        others = [s.request(f"b{i}", "b", now + 1.0 + i) for i in range(3)]
        await s.schedule_many(backlog + others)
        first = await s.refill()
        assert [r.key for r in first if r.handler == "b"] == ["b0", "b1", "b2"]
        sliced = [r for r in first if r.handler == "a"]
        assert [r.key for r in sliced] == [f"a{i:02}" for i in range(10)]
        assert s.horizon.covers(sliced[-1].due, sliced[-1].version, "a")
        assert not s.horizon.covers(sliced[-1].due, sliced[-1].version + 1, "a")
        assert s.horizon.covers(now + 0.5, 0, "b")  # the others' cursor went past the backlog
        room["a"] = 0  # its gate is full: nothing more is read
        assert await s.refill_capped() == []
        room["a"] = 25
        assert [r.key for r in await s.refill_capped()] == [f"a{i:02}" for i in range(10, 35)]
        s.horizon.cap(set())  # no longer capped: the shared cursor reads on from its own
        again = await s.refill()  # (the others' rows past it are handed out again)
        assert [r.key for r in again if r.handler == "a"] == [f"a{i:02}" for i in range(35, 50)]
    finally:
        await s.close()


async def test_the_rows_of_a_capped_read_that_fills_its_room_are_all_adopted(pg_url: str) -> None:
    """Each row a capped read brings takes one of the handler's spare rows as the node adopts
    it (``Horizon.adopts``), so the read leaves its whole room spare. Before, a read that filled
    the room left none: the first of its rows moved the cursor back before itself and none was
    adopted, read after read (figure 10's PostgreSQL half, 60,000 timers at rate=4000: the
    limited handler stopped for good after 2,000-14,000 starts)."""
    s = await open_store(pg_url, "a", horizon=100.0)
    try:
        await s.maintain()
        s.horizon.cap({"a"})
        s.horizon.room = lambda handler: 10
        now = db_now(pg_url) - 5.0  # all overdue
        await s.schedule_many([s.request(f"a{i:02}", "a", now + i / 100) for i in range(25)])
        first = [r for r in await s.refill() if r.handler == "a"]
        assert [r.key for r in first] == [f"a{i:02}" for i in range(10)]
        assert all(s.horizon.adopts(r.due, r.version, "a") for r in first)
        more = await s.refill_capped()  # on from where the first read reached
        assert [r.key for r in more] == [f"a{i:02}" for i in range(10, 20)]
        assert all(s.horizon.adopts(r.due, r.version, "a") for r in more)
        assert not s.horizon.adopts(more[-1].due, more[-1].version + 1, "a")  # past the cursor
    finally:
        await s.close()
