"""The stored trace context: an optional trailing field of Schedule and Redrive records and of
snapshot rows; absent, the stored bytes are what they were before the field existed."""

from __future__ import annotations

import msgpack
import pytest

from journal import Redrive, Schedule, codec
from journal.errors import JournalCorrupt
from journal.fold import fold_sealed, fold_snapshot
from journal.rules import apply
from journal.state import DEAD, PENDING, TimerRow

CONTEXT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01 vendor=x"


def test_untraced_schedule_is_the_six_field_array() -> None:
    kind, body = codec.encode(Schedule("k", 1, "h", 5.0, None, 1.0))
    assert body == msgpack.packb(("k", 1, "h", 5.0, None, 1.0), use_bin_type=True)
    assert codec.schedule_row("k", 1, "h", 5.0, None, 1.0) == (kind, body)


def test_traced_schedule_round_trips_and_folds() -> None:
    record = Schedule("k", 1, "h", 5.0, None, 1.0, CONTEXT)
    kind, body = codec.encode(record)
    assert codec.schedule_row("k", 1, "h", 5.0, None, 1.0, CONTEXT) == (kind, body)
    assert codec.decode(kind, body) == record
    timers: dict[str, TimerRow] = {}
    fold_sealed(timers, [(kind, codec.seal_record(1, kind, body))], 0, 0)  # type: ignore[arg-type]
    assert timers["k"].trace == CONTEXT


def test_a_replacing_schedule_replaces_the_context() -> None:
    timers: dict[str, TimerRow] = {}
    apply(timers, Schedule("k", 1, "h", 5.0, None, 1.0, CONTEXT))
    apply(timers, Schedule("k", 2, "h", 5.0, None, 1.0))
    assert timers["k"].trace is None


def test_redrive_with_and_without_context() -> None:
    timers = {"k": TimerRow("k", 1, "h", 5.0, None, DEAD, 1, "x", 1.0, 1.0, "old")}
    apply(timers, Redrive("k", 1, 2, 6.0, 2.0))
    assert timers["k"].trace == "old" and timers["k"].state is PENDING
    timers["k"].state = DEAD
    kind, body = codec.encode(Redrive("k", 2, 3, 6.0, 2.0, CONTEXT))
    assert codec.decode(kind, body) == Redrive("k", 2, 3, 6.0, 2.0, CONTEXT)
    apply(timers, codec.decode(kind, body))
    assert timers["k"].trace == CONTEXT


@pytest.mark.parametrize("trace", [None, CONTEXT])
def test_snapshot_row_round_trips(trace: str | None) -> None:
    row = TimerRow("k", 3, "h", 5.0, b"\x01", PENDING, 0, None, None, 2.0, trace)
    stored = codec.encode_row(row)
    assert codec.decode_row(*stored) == row
    timers: dict[str, TimerRow] = {}
    fold_snapshot(timers, [stored], 0)
    assert timers["k"] == row
    untraced = codec.encode_row(TimerRow("k", 3, "h", 5.0, b"\x01", PENDING, 0, None, None, 2.0))
    assert len(stored[3]) - len(untraced[3]) == (0 if trace is None else 2 + len(CONTEXT))


def test_a_trace_that_is_not_a_str_is_damage() -> None:
    body = msgpack.packb(("k", 1, "h", 5.0, None, 1.0, 7), use_bin_type=True)
    with pytest.raises(JournalCorrupt, match="does not match"):
        codec.decode(codec.SCHEDULE_KIND, body)
