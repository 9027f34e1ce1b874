"""journal.postgres.firing: the attempt's compare-and-set and its fenced outcomes."""

from __future__ import annotations

from pg_support import db_now, expire_leases, open_store, row_of, sql

from journal.postgres import Outcome


async def test_an_attempt_claims_a_due_pending_version_once_and_records_the_epoch(
    pg_url: str,
) -> None:
    s = await open_store(pg_url, "a")
    try:
        change = await s.maintain()
        [t] = await s.schedule_many([s.request("k", "h", db_now(pg_url) - 0.5)])
        result = await s.attempt([("k", t.timer.version)])
        [claimed] = result.claimed
        epoch = change.gained[s.partition_of("k")]
        assert (claimed.attempt, claimed.epoch) == (1, epoch)
        assert result.db_now is not None and claimed.first_attempt_at >= t.timer.due
        assert row_of(pg_url, "k")["run_epoch"] == epoch
        # A second claim of the same version finds it RUNNING: nothing.
        again = await s.attempt([("k", t.timer.version)])
        assert again.claimed == [] and again.early == []
    finally:
        await s.close()


async def test_an_attempt_is_never_early_by_the_database_clock(pg_url: str) -> None:
    s = await open_store(pg_url, "a")
    try:
        await s.maintain()
        due = db_now(pg_url) + 60.0  # a node whose clock ran a minute fast would fire it now
        [t] = await s.schedule_many([s.request("k", "h", due)])
        result = await s.attempt([("k", t.timer.version)])
        assert result.claimed == [] and result.early == [("k", due)]
        assert row_of(pg_url, "k")["state"] == 0 and row_of(pg_url, "k")["attempts"] == 0
    finally:
        await s.close()


async def test_a_replaced_or_cancelled_version_fails_its_compare_and_set(pg_url: str) -> None:
    s = await open_store(pg_url, "a")
    try:
        await s.maintain()
        past = db_now(pg_url) - 1
        [old] = await s.schedule_many([s.request("r", "h", past)])
        [new] = await s.schedule_many([s.request("r", "h", past)])
        [gone] = await s.schedule_many([s.request("c", "h", past)])
        assert await s.cancel("c") == "CANCELED"
        result = await s.attempt([("r", old.timer.version), ("c", gone.timer.version)])
        assert result.claimed == [] and result.early == []
        assert row_of(pg_url, "r")["attempts"] == 0 and row_of(pg_url, "c")["state"] == 3
        assert [c.key for c in (await s.attempt([("r", new.timer.version)])).claimed] == ["r"]
    finally:
        await s.close()


async def test_a_stale_epoch_can_neither_claim_nor_record_an_outcome(pg_url: str) -> None:
    a = await open_store(pg_url, "a", partitions=1)
    b = await open_store(pg_url, "b", partitions=1)
    try:
        await a.maintain()
        past = db_now(pg_url) - 1
        [one] = await a.schedule_many([a.request("one", "h", past)])
        [two] = await a.schedule_many([a.request("two", "h", past)])
        [claimed] = (await a.attempt([("one", one.timer.version)])).claimed
        expire_leases(pg_url, "a")
        taken = await b.maintain()
        assert taken.gained == {0: claimed.epoch + 1} and taken.reset == 1
        # a still believes it holds partition 0 at the old epoch (its local deadline has
        # not passed): the database refuses it all the same.
        assert a.leases.epoch_of(0) == claimed.epoch
        assert (await a.attempt([("two", two.timer.version)])).claimed == []
        ack = Outcome("one", one.timer.version, claimed.epoch, "SUCCEEDED")
        assert await a.finish([ack]) == set()
        row = row_of(pg_url, "one")
        assert (row["state"], row["attempts"]) == (0, 1)  # failover kept the attempt
        [retaken] = (await b.attempt([("one", one.timer.version)])).claimed
        assert (retaken.attempt, retaken.epoch) == (2, claimed.epoch + 1)
        assert await a.finish([ack]) == set()  # still stale: RUNNING now, but b's epoch
        assert await b.finish([ack._replace(epoch=retaken.epoch)]) == {"one"}
    finally:
        await a.close()
        await b.close()


async def test_outcomes_retry_dead_and_succeeded_in_one_batch(pg_url: str) -> None:
    s = await open_store(pg_url, "a")
    try:
        await s.maintain()
        past = db_now(pg_url) - 1
        done = await s.schedule_many([s.request(k, "h", past) for k in ("ok", "retry", "dead")])
        claims = (await s.attempt([(d.timer.key, d.timer.version) for d in done])).claimed
        assert len(claims) == 3
        by_key = {c.key: c for c in claims}
        outcomes = [
            Outcome("ok", by_key["ok"].version, by_key["ok"].epoch, "SUCCEEDED"),
            Outcome("retry", by_key["retry"].version, by_key["retry"].epoch, "PENDING", "e1", 9.0),
            Outcome("dead", by_key["dead"].version, by_key["dead"].epoch, "DEAD", "e2"),
        ]
        assert await s.finish(outcomes) == {"ok", "retry", "dead"}
        assert await s.finish(outcomes) == set()  # each applies once
        retry = row_of(pg_url, "retry")
        assert (retry["state"], retry["due"], retry["error"], retry["attempts"]) == (
            0,
            9.0,
            "e1",
            1,
        )
        assert row_of(pg_url, "dead")["state"] == 4 and row_of(pg_url, "ok")["state"] == 2
        finished = sql(pg_url, "SELECT key FROM wheel_timers WHERE finished_at IS NOT NULL")
        assert finished == [("ok",)]  # DEAD is kept until redriven: not "finished"
    finally:
        await s.close()


async def test_many_keys_are_claimed_in_one_statement(pg_url: str) -> None:
    s = await open_store(pg_url, "a")
    try:
        await s.maintain()
        past = db_now(pg_url) - 1
        done = await s.schedule_many([s.request(f"k{i}", "h", past) for i in range(800)])
        pairs = [(d.timer.key, d.timer.version) for d in done]
        result = await s.attempt([*pairs, ("k0", pairs[0][1] - 1)])
        assert sorted(c.key for c in result.claimed) == sorted(k for k, _ in pairs)
        assert {c.attempt for c in result.claimed} == {1}
    finally:
        await s.close()


async def test_give_up_makes_a_pending_timer_dead_without_an_attempt(pg_url: str) -> None:
    s = await open_store(pg_url, "a")
    try:
        await s.maintain()
        [t] = await s.schedule_many([s.request("k", "h", 1.0)])
        assert await s.give_up([("k", t.timer.version, "attempt 3 was interrupted")]) == {"k"}
        row = row_of(pg_url, "k")
        assert (row["state"], row["attempts"], row["error"]) == (4, 0, "attempt 3 was interrupted")
        assert await s.give_up([("k", t.timer.version, "again")]) == set()
    finally:
        await s.close()


async def test_an_attempt_whose_handler_never_started_is_given_back_uncharged(
    pg_url: str,
) -> None:
    s = await open_store(pg_url, "a")
    try:
        await s.maintain()
        past = db_now(pg_url) - 1
        done = await s.schedule_many([s.request(k, "h", past) for k in ("k", "c")])
        pairs = [(d.timer.key, d.timer.version) for d in done]
        assert len((await s.attempt(pairs)).claimed) == 2
        assert await s.cancel("c") == "CANCEL_REQUESTED"
        assert await s.unclaim(pairs) == {"k"}  # "c" stays for its owner to finish CANCELED
        row = row_of(pg_url, "k")
        assert (row["state"], row["attempts"]) == (0, 0)
        assert sql(pg_url, "SELECT first_attempt_at FROM wheel_timers WHERE key = 'k'") == [(None,)]
        assert await s.unclaim(pairs) == set()
        [again] = (await s.attempt(pairs[:1])).claimed
        assert again.attempt == 1
    finally:
        await s.close()
