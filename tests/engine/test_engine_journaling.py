"""``submit_safely``: the firing path's records reach the journal, and it never raises."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from journal import Attempt, Dead, Journal, JournalError, Record, Retry
from wheel_engine.commits import submit_safely


async def test_one_unencodable_record_does_not_hold_back_the_others(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    journal = await Journal.open(tmp_path / "t.db")
    try:
        records: list[Record] = [
            Attempt("a", 1, 1, 1.0),
            Attempt("bad\ud800", 2, 1, 1.0),  # cannot be written at all: left out, logged
            Retry("c", 3, 1, "text \udc80 here", 5.0, 1.0),  # its text is escaped
            Dead("d", 4, 1, "fine", 1.0),
        ]
        with caplog.at_level(logging.ERROR, logger="wheel_engine.commits"):
            await submit_safely(journal, records)
        written = [record for _, record in await journal.history("a")]
        written += [record for _, record in await journal.history("c")]
        written += [record for _, record in await journal.history("d")]
        assert written == [
            records[0],
            Retry("c", 3, 1, "text \\udc80 here", 5.0, 1.0),
            records[3],
        ]
        assert "cannot journal Attempt of timer 'bad\\ud800'" in caplog.text
    finally:
        await journal.close()


async def test_a_closed_journal_gives_a_failed_future(tmp_path: Path) -> None:
    journal = await Journal.open(tmp_path / "t.db")
    await journal.close()
    future = submit_safely(journal, [Attempt("a", 1, 1, 1.0)])  # does not raise
    with pytest.raises(JournalError):
        await future
