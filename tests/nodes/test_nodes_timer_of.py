"""A stored PostgreSQL row becomes the same timer recovery builds from a journal row (#24)."""

from __future__ import annotations

import msgpack

from journal.postgres import StoredTimer
from wheel_engine.model import TimerState
from wheel_engine.nodes.adopting import timer_of
from wheel_engine.timer import UNDECODED, Timer, recovered_timer

#: Every field, the out-of-line extras by what they hold. Spelled out: a compiled (mypyc) Timer
#: has no ``__slots__`` to read them from.
_FIELDS = (
    *("attempts", "due", "first_attempt_at", "handler", "interrupt", "key", "payload", "state"),
    *("updated_at", "worker", "packed", "trace", "last_error"),
    *("version", "tick", "where", "pos"),
)


def _row(payload: bytes | None, trace: str | None) -> StoredTimer:
    return StoredTimer(
        "k", 7, "h", 12.5, payload, TimerState.RUNNING, 2, "boom", 3.0, 4.0, 1, 9, False, 11, trace
    )


def _fields(timer: Timer) -> dict[str, object]:
    return {name: getattr(timer, name) for name in _FIELDS}


def test_timer_of_matches_recovered_timer_and_keeps_the_trace() -> None:
    for payload in (msgpack.packb({"a": 1}), None):
        row = _row(payload, "00-trace-01")
        adopted = timer_of(row)
        expected = recovered_timer(*row[:10])  # the fields in the constructor's order
        expected.trace = row.trace
        assert _fields(adopted) == _fields(expected)
        assert adopted.trace == "00-trace-01"
        assert (adopted.payload is UNDECODED) == (payload is not None)
        if payload is not None:
            assert adopted.decode_payload() == {"a": 1}
