"""Bounded, safe diagnostics: what is kept of a handler's exception (``last_error``, the journal's
Retry and Dead records, the DEAD log line), the ``describe_error`` hook and ``max_error_bytes``."""

from __future__ import annotations

import logging
import re
import sqlite3
from pathlib import Path

import pytest

from journal import Ack, Dead, Journal, JournalError, Record, Retry
from wheel_engine import Engine, Firing, RetryPolicy, TimerState
from wheel_engine.commits import log_write_failure
from wheel_engine.diagnostics import bounded, default
from wheel_engine.testing import VirtualClock

TOKEN = "sk_live_51HZ7xQ2eZvKYlo2C"  # what must never reach the journal or the logs
PAYLOAD_MARK = "card-4242-4242-4242-4242"  # a payload is never logged either
POLICY = RetryPolicy(max_attempts=3, initial=1, multiplier=1, jitter=False)


def test_bounded_cuts_on_a_character_boundary_and_says_how_much() -> None:
    text = "RuntimeError: " + "é" * 5000  # two bytes each
    out = bounded(text, 200, keep=len("RuntimeError: "))
    assert len(out.encode()) <= 200
    kept, marker = out.split(" [... ")
    assert kept.startswith("RuntimeError: é") and set(kept[14:]) == {"é"}
    cut = int(marker.removesuffix(" bytes cut]"))
    assert cut == len(text.encode()) - len(kept.encode())


def test_bounded_keeps_short_text_and_replaces_lone_surrogates() -> None:
    assert bounded("fine", 64) == "fine"
    assert bounded("bad \udc80 byte", 64) == "bad ? byte"  # encodable as UTF-8, always


def test_default_keeps_the_type_even_when_the_message_is_huge() -> None:
    class AnExceptionWithAVeryLongNameIndeed(Exception):
        pass

    out = default(AnExceptionWithAVeryLongNameIndeed("x" * 10_000), 64)
    assert out.startswith("AnExceptionWithAVeryLongNameIndeed: ")
    assert out.endswith(" bytes cut]")

    class Unprintable(Exception):
        def __str__(self) -> str:
            raise ValueError("no")

    assert default(Unprintable(), 64) == "Unprintable"


def test_max_error_bytes_is_checked() -> None:
    for bad in (0, 63, 2.5, "2048"):
        with pytest.raises(ValueError):
            Engine(None, max_error_bytes=bad)  # type: ignore[arg-type]


def record_bytes(db: Path, after_seq: int = 0) -> int:
    """Bytes of the journal's records after ``after_seq``, as stored (WAL pages vary by luck)."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        (total,) = con.execute(
            "SELECT coalesce(sum(length(body)), 0) FROM records WHERE seq > ?", (after_seq,)
        ).fetchone()
    finally:
        con.close()
    return int(total)


async def error_records(journal: Journal, key: str) -> list[str]:
    return [r.error for _, r in await journal.history(key) if isinstance(r, Retry | Dead)]


async def test_a_10_mb_message_costs_at_most_the_bound_per_attempt(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    clock = VirtualClock()
    engine = Engine(db, clock=clock, durability="normal")
    body = "<html>" + "ü" * (5 * 1024 * 1024)  # a 10 MB response body in the message

    @engine.handler("h", retry=POLICY)
    async def handler(firing: Firing) -> None:
        raise RuntimeError(f"502 from upstream: {body}")

    async with engine:
        await engine.schedule("h", delay=1, key="k")
        assert engine.journal is not None
        await engine.journal.flush()
        scheduled = engine.journal.last_seq
        await clock.advance(10)
        info = engine.get("k")
        assert info is not None and info.state is TimerState.DEAD and info.attempts == 3
        assert info.last_error is not None and len(info.last_error.encode()) <= 2048
        assert info.last_error.startswith("RuntimeError: 502 from upstream: <html>ü")
        errors = await error_records(engine.journal, "k")
        assert len(errors) == 3 and all(len(e.encode()) <= 2048 for e in errors)
        await engine.journal.flush()
    # Three failed attempts wrote three Attempt records, two Retry and a Dead: at most the 2 KB
    # of error text each, plus under a hundred bytes of the rest of each record.
    grown = record_bytes(db, scheduled)
    assert 3 * 2000 < grown < 3 * (2048 + 2 * 100)


async def test_the_hook_decides_what_is_kept_and_nothing_secret_is_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "t.db"
    clock = VirtualClock()
    engine = Engine(db, clock=clock, durability="normal", max_error_bytes=256)

    def redact(error: BaseException) -> str:
        return re.sub(r"sk_live_\w+", "sk_live_<redacted>", f"{type(error).__name__}: {error}")

    @engine.handler("h", retry=POLICY, describe_error=redact)
    async def handler(firing: Firing) -> None:
        raise PermissionError(f"401 for Authorization: Bearer {TOKEN} " + "z" * 1000)

    caplog.set_level(logging.INFO)
    async with engine:
        await engine.schedule("h", delay=1, key="k", payload={"card": PAYLOAD_MARK})
        await clock.advance(10)
        info = engine.get("k")
        assert info is not None and info.state is TimerState.DEAD
        assert info.last_error is not None
        assert info.last_error.startswith(
            "PermissionError: 401 for Authorization: Bearer sk_live_<r"
        )
        assert len(info.last_error.encode()) <= 256 and info.last_error.endswith(" bytes cut]")
        assert engine.journal is not None
        errors = await error_records(engine.journal, "k")
        assert errors and all(TOKEN not in e for e in errors)
    with open(db, "rb") as file:
        assert TOKEN.encode() not in file.read()
    dead = [r for r in caplog.records if "is DEAD" in r.getMessage()]
    assert len(dead) == 1 and "k (version 1) is DEAD after 3 attempt(s)" in dead[0].getMessage()
    assert TOKEN not in caplog.text and PAYLOAD_MARK not in caplog.text
    assert all(r.exc_info is None for r in caplog.records)  # tracebacks only at DEBUG


async def test_a_raising_hook_falls_back_to_the_type_and_is_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = VirtualClock()
    engine = Engine(None, clock=clock)

    def broken(error: BaseException) -> str:
        raise KeyError(TOKEN)

    @engine.handler("h", retry=POLICY, describe_error=broken)
    async def handler(firing: Firing) -> None:
        raise ConnectionError(TOKEN)

    @engine.handler("wrong-type", retry=POLICY, describe_error=lambda error: 42)  # type: ignore[arg-type,return-value]
    async def other(firing: Firing) -> None:
        raise TimeoutError("slow")

    async with engine:
        for key in ("a", "b"):
            await engine.schedule("h", delay=1, key=key)
        await engine.schedule("wrong-type", delay=1, key="c")
        await clock.advance(10)
        assert [engine.get(key).last_error for key in "abc"] == [  # type: ignore[union-attr]
            "ConnectionError",
            "ConnectionError",
            "TimeoutError",
        ]
    hook_lines = [r.getMessage() for r in caplog.records if "describe_error" in r.getMessage()]
    assert len(hook_lines) == 2  # once per handler, not once per failure (six failures)
    assert "'h' raised KeyError" in hook_lines[0] and TOKEN not in caplog.text


async def test_handler_failures_are_logged_only_at_debug_without_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = VirtualClock()
    engine = Engine(None, clock=clock)

    @engine.handler("h", retry=RetryPolicy(max_attempts=2, initial=1, jitter=False))
    async def handler(firing: Firing) -> None:
        raise ValueError("bad")

    caplog.set_level(logging.DEBUG, logger="wheel_engine.outcomes")
    async with engine:
        await engine.schedule("h", delay=1, key="k")
        await clock.advance(5)
    assert all(r.exc_info is None for r in caplog.records)  # the described text, no traceback
    failed = [r for r in caplog.records if "failed: timer k" in r.getMessage()]
    assert [r.levelno for r in failed] == [logging.DEBUG, logging.DEBUG]
    assert "timer k (version 1, attempt 1): ValueError: bad" in failed[0].getMessage()


async def test_compaction_keeps_only_the_last_error_of_a_finished_timer(tmp_path: Path) -> None:
    clock = VirtualClock()
    engine = Engine(tmp_path / "t.db", clock=clock, durability="normal")
    failures = iter(range(1, 10))

    @engine.handler("h", retry=POLICY)
    async def handler(firing: Firing) -> None:
        raise RuntimeError(f"failure {next(failures)}")

    async with engine:
        await engine.schedule("h", delay=1, key="k")
        await clock.advance(10)
        assert engine.journal is not None
        assert len(await error_records(engine.journal, "k")) == 3  # one per attempt, until...
        await engine.compact()
        assert await engine.journal.history("k") == []
        row = await engine.journal.snapshot_row("k")
        assert row is not None and (row.state, row.last_error) == (
            "DEAD",
            "RuntimeError: failure 3",
        )


def test_a_failed_write_is_one_line_naming_the_timers(caplog: pytest.LogCaptureFixture) -> None:
    records: list[Record] = [
        Dead("k1", 7, 3, "RuntimeError: line one\nline two", 0.0),
        Ack("k2", 8, 0.0),
    ]
    log_write_failure(records, JournalError("database or disk is full: t.db"))
    (line,) = caplog.records
    assert line.levelno == logging.WARNING and "\n" not in line.getMessage()
    assert line.getMessage() == (
        "journal write of 2 Dead record(s) failed (timer k1, version 7, attempt 3, and 1 more):"
        " database or disk is full: t.db"
    )
