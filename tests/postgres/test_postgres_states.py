"""The PostgreSQL journal's SQL names its states: every state number in a statement comes from
``journal.state`` (through ``journal.postgres.states``), none is spelled bare, and what the
server stores and indexes are those same codes."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from pg_support import open_store, row_of, sql

from journal.postgres import states
from journal.state import (
    CANCELED,
    DEAD,
    FINISHED,
    PENDING,
    RUNNING,
    STATE_CODE,
    STATES,
    SUCCEEDED,
)

#: Where the product writes SQL against ``wheel_timers``.
ROOT = Path(__file__).resolve().parents[2]
SQL_SOURCES = sorted(
    [
        *(ROOT / "journal" / "postgres").glob("*.py"),
        *(ROOT / "wheel_engine" / "web").glob("pg_*.py"),
    ]
)

#: A state written as a number in the literal text of a statement (interpolated codes are not
#: literal text: an f-string's pieces around ``{PENDING_CODE}`` hold no digit).
BARE_STATE = re.compile(
    r"\bstate\s*(?:=|<>|!=)\s*\d"  # state = 0
    r"|\bstate\s+(?:NOT\s+)?IN\s*\(\s*\d"  # state IN (2, 3)
    r"|\bstate\s*=\s*CASE\b.*?\b(?:THEN|ELSE)\s+\d"  # state = CASE ... THEN 3 ELSE 0 END
    r"|\bstate\)\s*(?:SELECT|VALUES)\b.*?,\s*\d+\s*(?:FROM\b|\))",  # INSERT (.., state) .., 0
    re.IGNORECASE | re.DOTALL,
)


def literal_pieces(path: Path) -> list[str]:
    """Every string literal of ``path``, an f-string as its literal parts (adjacent literals are
    one piece, as Python joins them)."""
    pieces = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            pieces.append(node.value)
    return pieces


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE wheel_timers t SET state = 4, last_error = o.error",
        " WHERE t.key = o.key AND t.state IN (0, 1)",
        "WHERE t.state NOT IN (0, 1)",
        "UPDATE wheel_timers t SET state = CASE WHEN t.cancel_requested THEN 3 ELSE 0 END,",
        "INSERT INTO wheel_timers AS t (key, version, state) SELECT r.key, 7, 0 FROM unnest(x)",
        "INSERT INTO wheel_timers (key, state) VALUES (%s, 0)",
    ],
)
def test_the_detector_sees_a_bare_state(statement: str) -> None:
    assert BARE_STATE.search(statement)


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM wheel_version_seq",
        "first_attempt_at = CASE WHEN t.attempts = 1 THEN NULL ELSE t.first_attempt_at END",
        " WHERE (%(state)s::smallint IS NULL OR t.state = %(state)s::smallint)",
    ],
)
def test_the_detector_leaves_other_numbers_alone(statement: str) -> None:
    assert not BARE_STATE.search(statement)


@pytest.mark.parametrize("path", SQL_SOURCES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_statement_spells_a_state_as_a_number(path: Path) -> None:
    bare = [piece for piece in literal_pieces(path) if BARE_STATE.search(piece)]
    assert bare == [], f"{path}: interpolate journal.postgres.states instead"


def test_the_sql_codes_are_journal_states_codes() -> None:
    named = (PENDING, RUNNING, SUCCEEDED, CANCELED, DEAD)
    sql_codes = [states.PENDING_CODE, states.RUNNING_CODE, states.SUCCEEDED_CODE]
    sql_codes += [states.CANCELED_CODE, states.DEAD_CODE]
    assert sql_codes == [STATES.index(s) for s in named]
    live, finished, requeued = states.LIVE_CODES, states.FINISHED_CODES, states.REQUEUED_STATE
    assert live == f"({STATE_CODE[PENDING]}, {STATE_CODE[RUNNING]})"
    assert finished == "({}, {})".format(*sorted(STATE_CODE[s] for s in FINISHED))
    assert requeued == (
        f"CASE WHEN t.cancel_requested THEN {STATE_CODE[CANCELED]} ELSE {STATE_CODE[PENDING]} END"
    )


async def test_the_server_stores_and_indexes_journal_states_codes(pg_url: str) -> None:
    store = await open_store(pg_url, "a")
    try:
        predicates = dict(
            sql(
                pg_url,
                "SELECT c.relname, pg_get_expr(i.indpred, i.indrelid) FROM pg_index i"
                " JOIN pg_class c ON c.oid = i.indexrelid"
                " WHERE i.indrelid = 'wheel_timers'::regclass AND i.indpred IS NOT NULL",
            )
        )
        codes = {name: {int(n) for n in re.findall(r"\d+", p)} for name, p in predicates.items()}
        assert codes == {
            "wheel_timers_pending": {STATE_CODE[PENDING]},
            "wheel_timers_running": {STATE_CODE[RUNNING]},
            "wheel_timers_finished": {STATE_CODE[s] for s in FINISHED},
            # Cluster-wide limits (#26): a handler's pending horizon, its running count.
            "wheel_timers_pending_handler": {STATE_CODE[PENDING]},
            "wheel_timers_running_handler": {STATE_CODE[RUNNING]},
        }
        await store.schedule_many([store.request("k", "h", 1e9)])
        assert row_of(pg_url, "k")["state"] == STATE_CODE[PENDING]
        assert await store.cancel("k") == "CANCELED"
        assert row_of(pg_url, "k")["state"] == STATE_CODE[CANCELED]
    finally:
        await store.close()
