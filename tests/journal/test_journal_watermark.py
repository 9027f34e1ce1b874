"""The high-water mark: a journal that lost its committed tail does not open as if whole."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from journal import Journal, JournalCorrupt
from journal.reader import check_sync
from journal.records import Schedule
from journal.watermark import mark_path, read_mark


def schedules(first: int, n: int) -> list[Schedule]:
    return [Schedule(f"k{i}", i, "h", 1.0, None, 1.0) for i in range(first, first + n)]


async def write_and_close(db: str, n: int) -> None:
    j = await Journal.open(db)
    await j.submit(schedules(1, n))
    await j.close()


def copy_open_journal(db: str, to: Path, *, wal: bool = True, mark: bool = True) -> str:
    """The files of an open journal (its last commits are still in the WAL)."""
    to.mkdir()
    shutil.copy(db, to / "c.db")
    if wal:
        shutil.copy(db + "-wal", to / "c.db-wal")
    if mark:
        shutil.copy(db + "-hwm", to / "c.db-hwm")
    return str(to / "c.db")


async def test_the_mark_follows_each_commit_and_is_private(db: str) -> None:
    j = await Journal.open(db)
    assert read_mark(db) is not None and read_mark(db).seq == 0  # type: ignore[union-attr]
    await j.submit(schedules(1, 3))
    assert read_mark(db).seq == 3  # type: ignore[union-attr]
    await j.submit(schedules(4, 2))
    assert read_mark(db).seq == 5  # type: ignore[union-attr]
    assert stat.S_IMODE(os.stat(mark_path(db)).st_mode) == 0o600
    await j.compact(retention=0.0, now=0.0)  # the highest seq stays 5: the mark still holds
    await j.close()
    j = await Journal.open(db)
    assert len((await j.recover()).timers) == 5
    assert (await j.check()).high_water_mark == 5
    await j.close()


async def test_a_deleted_wal_is_a_lost_tail(db: str, tmp_path: Path) -> None:
    j = await Journal.open(db)
    await j.submit(schedules(1, 10))
    copy = copy_open_journal(db, tmp_path / "copy", wal=False)
    await j.close()
    for readonly in (True, False):
        with pytest.raises(JournalCorrupt, match=r"lost committed records 1\.\.10") as info:
            journal = await Journal.open(copy, readonly=readonly)
            await journal.recover()
        assert info.value.seq == 1


async def test_check_reports_the_lost_tail(db: str, tmp_path: Path) -> None:
    j = await Journal.open(db)
    await j.submit(schedules(1, 4))
    await j.close()  # checkpointed into the file
    j = await Journal.open(db)
    await j.submit(schedules(5, 6))  # in the WAL only
    copy = copy_open_journal(db, tmp_path / "copy", wal=False)
    await j.close()
    report = check_sync(copy)
    assert not report.ok and report.missing == [(5, 10)]
    assert any("lost committed records 5..10" in p for p in report.problems)


async def test_a_missing_mark_is_allowed_and_written_again(db: str, tmp_path: Path) -> None:
    await write_and_close(db, 3)
    os.remove(mark_path(db))
    j = await Journal.open(db, readonly=True)  # a copy without its mark: opens
    assert len((await j.recover()).timers) == 3
    assert (await j.check()).ok
    await j.close()
    j = await Journal.open(db)  # the next writable open writes it
    await j.close()
    assert read_mark(db).seq == 3  # type: ignore[union-attr]


async def test_the_mark_of_a_deleted_journal_is_not_held_against_a_new_one(db: str) -> None:
    await write_and_close(db, 3)
    os.remove(db)  # the operator starts afresh; the sidecars stay behind
    j = await Journal.open(db)
    assert (await j.recover()).timers == {}
    await j.close()
    assert read_mark(db).seq == 0  # type: ignore[union-attr]


async def test_a_damaged_mark_is_reported_not_trusted(db: str) -> None:
    await write_and_close(db, 3)
    data = bytearray(Path(mark_path(db)).read_bytes())
    data[14] ^= 0x01
    Path(mark_path(db)).write_bytes(bytes(data))
    with pytest.raises(JournalCorrupt, match="high-water mark is damaged"):
        await Journal.open(db)
    ro = await Journal.open(db, readonly=True)
    with pytest.raises(JournalCorrupt, match="high-water mark is damaged"):
        await ro.recover()
    assert any("high-water mark is damaged" in p for p in (await ro.check()).problems)
    await ro.close()
