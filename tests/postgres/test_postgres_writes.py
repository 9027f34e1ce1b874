"""journal.postgres.writes: schedule, cancel and redrive from any node, on a real server."""

from __future__ import annotations

import asyncio

import pytest
from pg_support import db_now, open_store, row_of, sql

from journal.postgres import LiveKeyConflict, Outcome


async def test_versions_strictly_increase_across_nodes_and_are_never_reused(pg_url: str) -> None:
    a = await open_store(pg_url, "a")
    b = await open_store(pg_url, "b")
    try:
        seen: dict[str, list[int]] = {}
        for i in range(20):
            store = a if i % 2 else b
            key = f"k{i % 3}"
            [done] = await store.schedule_many([store.request(key, "h", 1e9 + i)])
            seen.setdefault(key, []).append(done.timer.version)
        # Concurrent replaces of one key from both nodes: each gets its own version and the
        # key ends on the highest (a replace draws its version under the row's lock).
        results = await asyncio.gather(
            *(s.schedule_many([s.request("hot", "h", 1e9)]) for s in [a, b] * 15)
        )
        hot = [r[0].timer.version for r in results]
        versions = [v for vs in seen.values() for v in vs] + hot
        assert len(set(versions)) == len(versions)
        for vs in seen.values():
            assert vs == sorted(vs)
        assert row_of(pg_url, "hot")["version"] == max(hot)
        # A failed transaction burns its versions; they are never handed out again.
        with pytest.raises(LiveKeyConflict):
            await a.schedule_many(
                [a.request("new", "h", 1e9), a.request("hot", "h", 1e9, None, "error")]
            )
        [after] = await b.schedule_many([b.request("k0", "h", 1e9)])
        assert after.timer.version > max(versions)
    finally:
        await a.close()
        await b.close()


async def test_on_conflict_keep_error_replace_and_a_rejected_batch_writes_nothing(
    pg_url: str,
) -> None:
    s = await open_store(pg_url, "a")
    try:
        [first] = await s.schedule_many([s.request("k", "h", 100.0, b"\x01")])
        [kept] = await s.schedule_many([s.request("k", "h2", 200.0, None, "keep")])
        assert kept.kept and kept.timer.version == first.timer.version
        assert kept.timer.due == 100.0 and kept.timer.payload == b"\x01"
        with pytest.raises(LiveKeyConflict) as info:
            await s.schedule_many(
                [s.request("other", "h", 1.0), s.request("k", "h", 1.0, None, "error")]
            )
        assert info.value.version == first.timer.version
        assert await s.lookup("other") is None  # the whole batch was rejected
        [replaced] = await s.schedule_many([s.request("k", "h3", 300.0)])
        assert replaced.timer.version > first.timer.version and replaced.timer.handler == "h3"
        # A key whose timer finished is simply scheduled again, whatever the policy.
        assert await s.cancel("k") == "CANCELED"
        [again] = await s.schedule_many([s.request("k", "h", 5.0, None, "error")])
        assert not again.kept and again.timer.state == "PENDING"
        # The same key twice in one batch: in order, the later one wins.
        done = await s.schedule_many([s.request("d", "h", 1.0), s.request("d", "h", 2.0)])
        assert done[0].timer.version < done[1].timer.version
        assert (await s.lookup("d")).due == 2.0  # type: ignore[union-attr]
    finally:
        await s.close()


async def test_cancel_pending_running_finished_unknown_and_stale(pg_url: str) -> None:
    s = await open_store(pg_url, "a")
    try:
        await s.maintain()
        past = db_now(pg_url) - 1
        [p] = await s.schedule_many([s.request("p", "h", past)])
        [r] = await s.schedule_many([s.request("r", "h", past)])
        claimed = (await s.attempt([("r", r.timer.version)])).claimed
        assert [c.key for c in claimed] == ["r"]
        assert await s.cancel("p", version=p.timer.version + 1000) == "NOT_FOUND"
        assert row_of(pg_url, "p")["state"] == 0  # a stale cancel changed nothing
        assert await s.cancel("p", version=p.timer.version) == "CANCELED"
        assert await s.cancel("p") == "ALREADY_DONE"
        assert await s.cancel("nope") == "NOT_FOUND"
        assert await s.cancel("r") == "CANCEL_REQUESTED"
        row = row_of(pg_url, "r")
        assert row["state"] == 1 and row["cancel_requested"]
        # The handler saw the cancel and stopped: its owner records CANCELED, fenced as ever.
        epoch = claimed[0].epoch
        assert await s.finish([Outcome("r", r.timer.version, epoch, "CANCELED")]) == {"r"}
        assert await s.cancel("r") == "ALREADY_DONE"
    finally:
        await s.close()


async def test_redrive_gives_a_dead_timer_a_new_version_with_attempts_reset(pg_url: str) -> None:
    s = await open_store(pg_url, "a")
    try:
        await s.maintain()
        [t] = await s.schedule_many([s.request("k", "h", db_now(pg_url) - 1)])
        assert await s.redrive("k") is None  # not DEAD
        [c] = (await s.attempt([("k", t.timer.version)])).claimed
        await s.finish([Outcome("k", c.version, c.epoch, "DEAD", "boom")])
        redriven = await s.redrive("k", at=123.0)
        assert redriven is not None
        assert redriven.version > t.timer.version and redriven.state == "PENDING"
        assert (redriven.attempts, redriven.due, redriven.first_attempt_at) == (0, 123.0, None)
        assert sql(pg_url, "SELECT count(*) FROM wheel_timers")[0][0] == 1
    finally:
        await s.close()
