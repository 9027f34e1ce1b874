"""Round trips per fired timer on PostgreSQL: a burst is claimed and finished in batches.

The statements are counted by the database itself: a statement-level trigger on the timer
table counts every UPDATE (an attempt's compare-and-set and an outcome's fenced write are both
one UPDATE of ``wheel_timers``), so the count does not depend on how the engine is built.
"""

from __future__ import annotations

from node_support import db_now, engine, sql, until

from wheel_engine import Firing

#: Timers in the burst: several start groups (max_concurrency 64) at once.
BURST = 300

_COUNTER = """
CREATE TABLE update_statements (n bigint NOT NULL);
INSERT INTO update_statements VALUES (0);
CREATE FUNCTION count_update_statement() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN UPDATE update_statements SET n = n + 1; RETURN NULL; END $$;
CREATE TRIGGER count_updates AFTER UPDATE ON wheel_timers
    FOR EACH STATEMENT EXECUTE FUNCTION count_update_statement();
"""


async def test_a_burst_is_finished_in_batches_not_one_statement_per_ack(pg_url: str) -> None:
    fired: list[str] = []
    e = engine(pg_url, "a")

    @e.handler("h")
    async def h(firing: Firing) -> None:
        fired.append(firing.key)

    async with e:
        at = db_now(pg_url) + 1.0
        await e.schedule_many([{"handler": "h", "key": f"k{i}", "at": at} for i in range(BURST)])
        sql(pg_url, _COUNTER)  # after scheduling: only the firing path's writes are counted
        await until(lambda: len(fired) == BURST)
        succeeded = "SELECT count(*) FROM wheel_timers WHERE state = 2 AND key LIKE 'k%'"
        await until(lambda: sql(pg_url, succeeded) == [(BURST,)])
        ((statements,),) = sql(pg_url, "SELECT n FROM update_statements")
    assert sorted(fired) == sorted(f"k{i}" for i in range(BURST))
    # One attempt statement per start group of up to 64 and about as many outcome statements:
    # ~10 here. One outcome statement per ack would be more than BURST.
    assert statements <= BURST // 8, statements
