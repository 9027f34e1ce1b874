"""``Commits``: the one awaited commit path, with its undo and its tracking of keys in flight."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from journal import Journal, JournalError, Schedule
from wheel_engine.clock import SystemClock
from wheel_engine.commits import Commits
from wheel_engine.timers import TimerTable


def commits_on(journal: Journal) -> Commits:
    table = TimerTable({}, tick=0.001, retention=60.0, max_retained=10)
    made = Commits(table, SystemClock(), compact_min_records=10_000)
    made.install_journal(journal)
    return made


async def test_a_tracked_commit_leads_its_keys_to_it_until_it_is_done(tmp_path: Path) -> None:
    journal = await Journal.open(tmp_path / "t.db")
    commits = commits_on(journal)
    undone: list[object] = []
    try:
        records = [Schedule("a", 1, "h", 5.0, None, 1.0), Schedule("b", 2, "h", 5.0, None, 1.0)]
        commit = asyncio.ensure_future(commits.commit(records, track=True, undo=undone.append))
        await asyncio.sleep(0)  # submitted, not committed yet
        assert commits.in_flight("a") and commits.in_flight("b")
        await commits.wait_committed(["a", "b", "c"])  # "c" has no commit: not waited for
        await commit
        assert not commits.committing and undone == []
    finally:
        await journal.close()


async def test_a_failed_commit_calls_undo_with_its_subject_before_raising(tmp_path: Path) -> None:
    journal = await Journal.open(tmp_path / "t.db")
    await journal.close()
    commits = commits_on(journal)
    undone: list[object] = []
    subject = object()
    with pytest.raises(JournalError):
        await commits.commit(
            [Schedule("a", 1, "h", 5.0, None, 1.0)], track=True, undo=undone.append, subject=subject
        )
    assert undone == [subject] and not commits.committing


async def test_outcome_writes_never_raise_on_a_closed_journal(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    journal = await Journal.open(tmp_path / "t.db")
    await journal.close()
    commits = commits_on(journal)
    commits.write([Schedule("a", 1, "h", 5.0, None, 1.0)])  # does not raise
    await asyncio.sleep(0)
    assert "journal write of 1 Schedule record(s) failed (timer a, version 1)" in caplog.text
