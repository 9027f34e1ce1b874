"""The state fold: the rules in journal.rules.FOLD, run by apply, recovery and compaction alike."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from journal import codec
from journal.records import (
    KIND_OF,
    Ack,
    Attempt,
    Cancel,
    Dead,
    Kind,
    Record,
    Redrive,
    Retry,
    Schedule,
)
from journal.recovery import fold_records, fold_sealed
from journal.rules import FOLD, apply
from journal.state import STATE_CODE, STATES, Malformed, TimerRow, TimerState
from wheel_engine.model import TimerState as ModelTimerState


def fold(records: list[Record]) -> dict[str, TimerRow]:
    timers: dict[str, TimerRow] = {}
    for r in records:
        apply(timers, r)
    return timers


def test_schedule_creates_pending_row() -> None:
    t = fold([Schedule("k", 1, "h", 10.0, b"\x01", 5.0)])
    assert t["k"] == TimerRow("k", 1, "h", 10.0, b"\x01", "PENDING", 0, None, None, 5.0)


def test_reschedule_replaces_and_stale_schedule_is_ignored() -> None:
    t = fold(
        [
            Schedule("k", 1, "h", 10.0, None, 1.0),
            Attempt("k", 1, 1, 2.0),
            Schedule("k", 3, "h2", 20.0, None, 3.0),
            Schedule("k", 2, "old", 30.0, None, 4.0),  # stale: lower version
        ]
    )
    row = t["k"]
    assert (row.version, row.handler, row.due, row.state, row.attempts) == (
        3,
        "h2",
        20.0,
        "PENDING",
        0,
    )
    assert row.updated_at == 3.0


def test_attempt_retry_ack() -> None:
    t = fold(
        [
            Schedule("k", 1, "h", 10.0, None, 1.0),
            Attempt("k", 1, 1, 10.5),
            Retry("k", 1, 1, "boom", 12.0, 10.6),
            Attempt("k", 1, 2, 12.1),
        ]
    )
    row = t["k"]
    assert row.state == "RUNNING"
    assert row.attempts == 2
    assert row.first_attempt_at == 10.5  # attempt 1 only
    assert row.last_error == "boom"
    assert row.due == 12.0
    apply(t, Ack("k", 1, 13.0))
    assert row.state == "SUCCEEDED"
    assert row.updated_at == 13.0


def test_stale_records_are_ignored() -> None:
    t = fold(
        [
            Schedule("k", 2, "h", 10.0, None, 1.0),
            Cancel("k", 1, 2.0),
            Ack("k", 1, 2.0),
            Attempt("k", 1, 1, 2.0),
            Dead("k", 1, 1, "x", 2.0),
            Retry("k", 1, 1, "x", 5.0, 2.0),
            Redrive("k", 1, 9, 5.0, 2.0),
            Cancel("nope", 1, 2.0),  # unknown key
        ]
    )
    assert t["k"] == TimerRow("k", 2, "h", 10.0, None, "PENDING", 0, None, None, 1.0)
    assert "nope" not in t


def test_cancel_dead_redrive() -> None:
    t = fold([Schedule("a", 1, "h", 10.0, None, 1.0), Cancel("a", 1, 2.0)])
    assert t["a"].state == "CANCELED"
    t = fold(
        [
            Schedule("b", 1, "h", 10.0, None, 1.0),
            Attempt("b", 1, 1, 10.0),
            Dead("b", 1, 1, "permanent", 11.0),
        ]
    )
    assert (t["b"].state, t["b"].last_error, t["b"].attempts) == ("DEAD", "permanent", 1)
    apply(t, Redrive("b", 1, 5, 50.0, 12.0))
    row = t["b"]
    assert (row.version, row.state, row.due, row.attempts, row.first_attempt_at) == (
        5,
        "PENDING",
        50.0,
        0,
        None,
    )
    assert row.last_error == "permanent"  # kept
    apply(t, Ack("b", 1, 13.0))  # old version: stale now
    assert row.state == "PENDING"


# -- the fast fold used by recovery is the same function ----------------------------------------

fold_keys = st.sampled_from(["a", "b", "c"])
small_versions = st.integers(min_value=1, max_value=6)
t_ = st.floats(min_value=0, max_value=1e6, allow_nan=False)
fold_records_strategy = st.lists(
    st.one_of(
        st.builds(
            Schedule, fold_keys, small_versions, st.sampled_from(["h", "g"]), t_, st.none(), t_
        ),
        st.builds(Cancel, fold_keys, small_versions, t_),
        st.builds(Attempt, fold_keys, small_versions, st.integers(1, 4), t_),
        st.builds(Ack, fold_keys, small_versions, t_),
        st.builds(Retry, fold_keys, small_versions, st.integers(1, 4), st.text(max_size=3), t_, t_),
        st.builds(Dead, fold_keys, small_versions, st.integers(1, 4), st.text(max_size=3), t_),
        st.builds(Redrive, fold_keys, small_versions, small_versions, t_, t_),
    ),
    max_size=60,
)


@settings(max_examples=300)
@given(fold_records_strategy)
def test_fast_fold_equals_apply(records: list[Record]) -> None:
    expected = fold(records)
    rows = [(i + 1, *codec.encode(r)) for i, r in enumerate(records)]
    got: dict[str, TimerRow] = {}
    max_version = fold_records(got, rows, 0)
    assert got == expected
    versions = [r.version for r in records] + [r.new_version for r in records if type(r) is Redrive]
    assert max_version == max(versions, default=0)


# -- one table of rules, one vocabulary of states -------------------------------------------------


def test_there_is_one_rule_per_kind_and_apply_runs_it() -> None:
    assert set(FOLD) == {int(k) for k in Kind}
    for cls, kind in KIND_OF.items():
        # Each rule is named after its kind (the common one, a schedule, is public: recovery
        # calls it directly).
        assert FOLD[int(kind)].__name__.lstrip("_").startswith(cls.__name__.lower())


def test_a_malformed_record_raises_instead_of_folding() -> None:
    t: dict[str, TimerRow] = {}
    for bad in [Ack("k", True, 1.0), Ack(1, 1, 1.0), Schedule("k", 1, "h", "soon", None, 1.0)]:  # type: ignore[arg-type]
        with pytest.raises(Malformed):
            apply(t, bad)
    with pytest.raises(ValueError):  # the wrong number of fields
        FOLD[4](t, ("k", 1))
    with pytest.raises(TypeError):
        apply(t, ("k", 1, 1.0))  # type: ignore[arg-type]
    assert t == {}


def test_states_are_one_str_enum_stored_by_code() -> None:
    assert ModelTimerState is TimerState
    assert [s.value for s in STATES] == ["PENDING", "RUNNING", "SUCCEEDED", "CANCELED", "DEAD"]
    assert STATE_CODE == {"PENDING": 0, "RUNNING": 1, "SUCCEEDED": 2, "CANCELED": 3, "DEAD": 4}
    assert [s.is_live for s in STATES] == [True, True, False, False, False]
    row = fold([Schedule("k", 1, "h", 10.0, None, 5.0)])["k"]
    assert row.state is TimerState.PENDING and row.state == "PENDING"


@settings(max_examples=300)
@given(fold_records_strategy)
def test_sealed_fold_equals_apply(records: list[Record]) -> None:
    """What recovery and compaction run on a schema-2 journal: the same rules via FOLD."""
    expected = fold(records)
    rows = [
        (k, codec.seal_record(seq, k, b))
        for seq, (k, b) in enumerate(codec.encode_many(records), 8)
    ]
    got: dict[str, TimerRow] = {}
    max_version = fold_sealed(got, rows, 7, 0)
    assert got == expected
    versions = [r.version for r in records] + [r.new_version for r in records if type(r) is Redrive]
    assert max_version == max(versions, default=0)
