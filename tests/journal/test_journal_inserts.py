"""The writer's INSERT statements: a batch as a few multi-row statements, stored as one-row
inserts store it."""

from __future__ import annotations

import sqlite3

import aiosqlite
import pytest
from hypothesis import given
from hypothesis import strategies as st

from journal import codec, inserts
from journal.records import Cancel, Schedule


@given(st.integers(min_value=0, max_value=5_000))
def test_statements_cover_the_batch_in_order_with_whole_statements(count: int) -> None:
    plan = list(inserts.statements(count))
    starts = [start for _, _, start, _ in plan]
    stops = [stop for _, _, _, stop in plan]
    assert starts == [0, *stops[:-1]][: len(plan)]  # contiguous, in order, from row 0
    assert (stops[-1] if plan else 0) == count
    widths = dict(inserts.STATEMENTS)
    for per, sql, start, stop in plan:
        assert sql == widths[per]
        assert (stop - start) % per == 0 and stop > start
        assert sql.count("?") == 3 * per
    assert [per for per, *_ in plan] == sorted({per for per, *_ in plan}, reverse=True)
    assert sum(stop - start for per, _, start, stop in plan if per == 1) < 16


def test_statements_of_a_thousand_rows_the_worked_example() -> None:
    plan = [(per, start, stop) for per, _, start, stop in inserts.statements(1_000)]
    assert plan == [(256, 0, 768), (16, 768, 992), (1, 992, 1_000)]


def test_statements_stay_under_the_oldest_sqlite_parameter_limit() -> None:
    assert all(3 * per <= 999 for per, _ in inserts.STATEMENTS)
    assert inserts.STATEMENTS[-1] == (1, inserts.INSERT_SQL)


@pytest.mark.parametrize("count", [1, 15, 16, 17, 300, 1_000])
async def test_insert_sealed_stores_what_one_row_inserts_store(db: str, count: int) -> None:
    records = [Schedule(f"k{i}", i, "h", 5.0 + i, b"p", 1.0) for i in range(count // 2)]
    records += [Cancel(f"k{i}", i, 2.0) for i in range(count - count // 2)]
    rows = codec.encode_many(records)
    kinds = [kind for kind, _ in rows]
    bodies = [body for _, body in rows]
    first = 250  # the seq's msgpack form widens at 256, inside most of these batches
    ddl = "CREATE TABLE records (seq INTEGER PRIMARY KEY, kind INTEGER NOT NULL, body BLOB)"
    async with aiosqlite.connect(db) as conn:
        await conn.execute(ddl)
        await inserts.insert_sealed(conn, first, kinds, bodies)
        await conn.commit()
    con = sqlite3.connect(db)
    stored = con.execute("SELECT seq, kind, body FROM records ORDER BY rowid").fetchall()
    con.close()
    expected = [
        (seq, kind, codec.seal_record(seq, kind, body))
        for seq, (kind, body) in enumerate(rows, first)
    ]
    assert stored == expected
