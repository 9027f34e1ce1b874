"""Recovery: snapshot + tail folded in seq order; RUNNING comes back PENDING; damage is named."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Sequence

import msgpack
import pytest

from journal import Journal, JournalCorrupt, JournalError, codec
from journal.records import Ack, Attempt, Cancel, Dead, Record, Redrive, Retry, Schedule
from journal.recovery import as_journaled, fold_sealed, recover_sync
from journal.state import TimerRow


async def write(path: str, records: Sequence[Record]) -> None:
    j = await Journal.open(path)
    await j.submit(records)
    await j.close()


async def test_empty_journal(db: str) -> None:
    j = await Journal.open(db)
    rec = await j.recover()
    assert (rec.timers, rec.max_version, rec.records) == ({}, 0, 0)
    await j.close()


async def test_fold_with_stale_records_and_running_to_pending(db: str) -> None:
    await write(
        db,
        [
            Schedule("a", 1, "h", 10.0, b"\x90", 1.0),
            Schedule("b", 2, "h", 11.0, None, 1.0),
            Schedule("c", 3, "h", 12.0, None, 1.0),
            Attempt("a", 1, 1, 10.1),
            Retry("a", 1, 1, "boom", 15.0, 10.2),
            Attempt("a", 1, 2, 15.1),  # the process died while attempt 2 ran
            Schedule("b", 4, "h", 20.0, None, 2.0),  # reschedule
            Cancel("b", 2, 3.0),  # stale cancel: version 2 is gone
            Attempt("c", 3, 1, 12.0),
            Dead("c", 3, 1, "perm", 12.5),
            Redrive("c", 3, 5, 30.0, 13.0),
            Ack("c", 3, 14.0),  # stale: c is version 5 now
        ],
    )
    j = await Journal.open(db)
    rec = await j.recover()
    a, b, c = rec.timers["a"], rec.timers["b"], rec.timers["c"]
    assert (a.state, a.attempts, a.first_attempt_at, a.last_error) == ("PENDING", 2, 10.1, "boom")
    assert a.payload == b"\x90"
    assert (b.version, b.state, b.due) == (4, "PENDING", 20.0)
    assert (c.version, c.state, c.due, c.attempts, c.last_error) == (5, "PENDING", 30.0, 0, "perm")
    assert rec.max_version == 5
    assert rec.records == 12
    assert rec.interrupted == ["a"]
    assert rec.last_seq == 12
    await j.close()


async def test_a_running_row_in_the_snapshot_comes_back_interrupted(db: str) -> None:
    # The snapshot holds "a" RUNNING and the tail no attempt at all: the snapshot's state alone
    # must make recovery look for interrupted rows.
    await write(db, [Schedule("a", 1, "h", 10.0, None, 1.0), Attempt("a", 1, 1, 10.1)])
    j = await Journal.open(db)
    await j.compact(retention=3600.0, now=20.0)
    await j.close()
    await write(db, [Schedule("b", 2, "h", 11.0, None, 2.0), Cancel("b", 2, 3.0)])
    j = await Journal.open(db)
    rec = await j.recover()
    await j.close()
    assert rec.snapshot_rows == 1
    assert rec.interrupted == ["a"]
    assert (rec.timers["a"].state, rec.timers["a"].attempts) == ("PENDING", 1)


async def test_readers_see_an_interrupted_row_running_as_journaled(db: str) -> None:
    # The CLI and the web console show what the journal says (an attempt committed, no outcome
    # yet), not what a restarted engine would make of it; a row replaced since stays PENDING.
    await write(db, [Schedule("a", 1, "h", 10.0, None, 1.0), Attempt("a", 1, 1, 10.1)])
    await write(db, [Schedule("b", 2, "h", 11.0, None, 2.0)])
    rec = as_journaled(recover_sync(db))
    assert rec.interrupted == ["a"]
    assert (rec.timers["a"].state, rec.timers["b"].state) == ("RUNNING", "PENDING")


async def test_no_attempt_and_no_running_row_means_nothing_interrupted(db: str) -> None:
    await write(db, [Schedule("a", 1, "h", 10.0, None, 1.0), Ack("a", 1, 10.1)])
    j = await Journal.open(db)
    rec = await j.recover()
    await j.close()
    assert (rec.interrupted, rec.timers["a"].state) == ([], "SUCCEEDED")


async def test_readonly_recover_matches_and_progress_is_reported(db: str) -> None:
    records = [Schedule(f"k{i}", i + 1, "h", float(i), None, 0.0) for i in range(120_000)]
    await write(db, records)
    ro = await Journal.open(db, readonly=True)
    seen: list[tuple[int, int]] = []
    rec = await ro.recover(progress=lambda done, total: seen.append((done, total)))
    assert len(rec.timers) == 120_000
    assert rec.max_version == 120_000
    assert seen[-1] == (120_000, 120_000)
    assert len(seen) >= 3
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
    await ro.close()


async def test_corrupted_record_body_names_its_seq(db: str) -> None:
    await write(db, [Schedule(f"k{i}", i + 1, "h", 1.0, None, 0.0) for i in range(10)])
    con = sqlite3.connect(db)
    con.execute("UPDATE records SET body = ? WHERE seq = 7", (b"\xc1garbage",))
    con.commit()
    con.close()
    j = await Journal.open(db)
    with pytest.raises(JournalCorrupt) as info:
        await j.recover()
    assert info.value.seq == 7
    assert "7" in str(info.value)
    report = await j.check()
    assert not report.ok
    assert report.corrupt_seqs == [7]
    await j.close()


@pytest.mark.parametrize(
    "body",
    [
        msgpack.packb(["k3", 1]),  # valid msgpack, wrong shape
        msgpack.packb(["k3", "1", "h", 1.0, None, 0.0]),  # wrong type
        b"",
    ],
)
async def test_wrong_shape_record_is_corrupt_not_skipped(db: str, body: bytes) -> None:
    await write(db, [Schedule(f"k{i}", i + 1, "h", 1.0, None, 0.0) for i in range(5)])
    con = sqlite3.connect(db)
    con.execute("UPDATE records SET body = ? WHERE seq = 3", (body,))
    con.commit()
    con.close()
    ro = await Journal.open(db, readonly=True)
    with pytest.raises(JournalCorrupt) as info:
        await ro.recover()
    assert info.value.seq == 3
    await ro.close()


async def test_unknown_kind_is_corrupt(db: str) -> None:
    await write(db, [Schedule("k", 1, "h", 1.0, None, 0.0)])
    con = sqlite3.connect(db)
    con.execute("UPDATE records SET kind = 42 WHERE seq = 1")
    con.commit()
    con.close()
    j = await Journal.open(db)
    with pytest.raises(JournalCorrupt) as info:
        await j.recover()
    assert info.value.seq == 1
    await j.close()


async def test_damaged_snapshot_row_is_corrupt(db: str) -> None:
    await write(db, [Schedule("k", 1, "h", 1.0, None, 0.0)])
    j = await Journal.open(db)
    await j.compact(retention=0, now=0)
    await j.close()
    con = sqlite3.connect(db)
    con.execute("UPDATE snapshot SET body = x'c1' WHERE key = 'k'")
    con.commit()
    con.close()
    j = await Journal.open(db)
    with pytest.raises(JournalCorrupt, match="'k'"):
        await j.recover()
    await j.close()


async def test_recover_sees_records_while_writing(db: str) -> None:
    j = await Journal.open(db)
    futs = [j.submit([Schedule(f"k{i}", i + 1, "h", 1.0, None, 0.0)]) for i in range(1000)]
    rec_task = asyncio.create_task(j.recover())
    await asyncio.gather(*futs)
    rec = await rec_task
    assert rec.records == len(rec.timers)  # a consistent prefix
    assert len((await j.recover()).timers) == 1000
    await j.close()


async def test_history_and_snapshot_row(db: str) -> None:
    await write(
        db,
        [
            Schedule("a", 1, "h", 10.0, None, 1.0),
            Schedule("ab", 2, "h", 10.0, None, 1.0),  # a prefix-match must not leak in
            Attempt("a", 1, 1, 10.0),
            Ack("a", 1, 11.0),
        ],
    )
    j = await Journal.open(db, readonly=True)
    hist = await j.history("a")
    assert [(seq, type(r).__name__) for seq, r in hist] == [
        (1, "Schedule"),
        (3, "Attempt"),
        (4, "Ack"),
    ]
    assert await j.history("zzz") == []
    assert await j.snapshot_row("a") is None
    info = await j.info()
    assert (info.tail_records, info.last_seq, info.snapshot_rows) == (4, 4, 0)
    await j.close()
    w = await Journal.open(db)
    await w.compact(retention=1e9, now=100.0)
    row = await w.snapshot_row("a")
    assert row is not None and row.state == "SUCCEEDED"
    assert await w.history("a") == []
    await w.close()


async def test_recover_on_closed_readonly_raises(db: str) -> None:
    await write(db, [])
    ro = await Journal.open(db, readonly=True)
    await ro.close()
    with pytest.raises(JournalError):
        await ro.recover()


# -- rows deleted, moved or renumbered: seqs are dense and sealed into each record -------------


def _sql(db: str, *statements: str) -> None:
    con = sqlite3.connect(db)
    for statement in statements:
        con.execute(statement)
    con.commit()
    con.close()


@pytest.mark.parametrize(
    ("statements", "seq"),
    [
        (["DELETE FROM records WHERE seq = 5"], 5),
        (["DELETE FROM records WHERE seq = 1"], 1),
        (["UPDATE records SET seq = 100 WHERE seq = 10"], 11),  # the newest, renumbered up
        (
            [
                "UPDATE records SET seq = 0 WHERE seq = 3",
                "UPDATE records SET seq = 3 WHERE seq = 4",
                "UPDATE records SET seq = 4 WHERE seq = 0",
            ],
            3,
        ),  # two records swapped
    ],
    ids=["deleted", "deleted-first", "renumbered-newest", "swapped"],
)
async def test_a_deleted_moved_or_renumbered_record_is_named(
    db: str, statements: list[str], seq: int
) -> None:
    await write(db, [Schedule(f"k{i}", i + 1, "h", 1.0, None, 0.0) for i in range(10)])
    _sql(db, *statements)
    for readonly in (True, False):
        j = await Journal.open(db, readonly=readonly)
        with pytest.raises(JournalCorrupt) as info:
            await j.recover()
        assert info.value.seq == seq
        assert not (await j.check()).ok
        await j.close()


async def test_a_changed_key_in_a_record_is_caught(db: str) -> None:
    await write(db, [Schedule("s74", 1, "h", 1.0, None, 0.0)])
    con = sqlite3.connect(db)
    (body,) = con.execute("SELECT body FROM records").fetchone()
    con.execute("UPDATE records SET body = ?", (body.replace(b"s74", b"S74"),))
    con.commit()
    con.close()
    j = await Journal.open(db)
    with pytest.raises(JournalCorrupt, match="record 1: checksum mismatch") as info:
        await j.recover()
    assert info.value.seq == 1
    await j.close()


async def test_bytes_moved_across_a_row_boundary_fold_right_and_check_names_them(db: str) -> None:
    """The batch's CRC pass and streaming decode see the same concatenation, which is exactly
    what was written: recovery is right. ``check`` looks at each row alone."""
    kind, body = codec.encode(Schedule("a", 1, "h", 1.0, None, 0.0))
    first, second = codec.seal_record(1, kind, body), codec.seal_record(2, kind, body)
    timers: dict[str, object] = {}
    fold_sealed(timers, [(kind, first[:-1]), (kind, first[-1:] + second)], 0, 0)  # type: ignore[arg-type]
    assert list(timers) == ["a"]
    await write(db, [Schedule("a", 1, "h", 1.0, None, 0.0), Schedule("a", 2, "h", 1.0, None, 0.0)])
    con = sqlite3.connect(db)
    (b1,), (b2,) = con.execute("SELECT body FROM records ORDER BY seq").fetchall()
    con.execute("UPDATE records SET body = ? WHERE seq = 1", (b1[:-1],))
    con.execute("UPDATE records SET body = ? WHERE seq = 2", (b1[-1:] + b2,))
    con.commit()
    con.close()
    j = await Journal.open(db, readonly=True)
    assert (await j.recover()).timers["a"].version == 2
    report = await j.check()
    assert report.corrupt_seqs == [1, 2]
    await j.close()


class Made:
    """A caller's own row class, as the engine passes its timer class: recovery must build
    these, once per timer, and fold every later record into them."""

    __slots__ = TimerRow.__slots__

    def __init__(self, *fields: object) -> None:
        self.trace = None  # not a factory argument: the fold sets it when a record has one
        for name, value in zip(self.__slots__[:-1], fields, strict=True):
            setattr(self, name, value)


def as_tuple(row: object) -> tuple[object, ...]:
    return tuple(getattr(row, name) for name in TimerRow.__slots__)


HISTORY: list[Record] = [
    Schedule("a", 1, "h", 10.0, b"\x90", 1.0),
    Schedule("b", 2, "h", 11.0, None, 1.0),
    Schedule("c", 3, "h", 12.0, None, 1.0),
    Schedule("d", 4, "h", 12.0, None, 1.0),
    Attempt("a", 1, 1, 10.1),
    Retry("a", 1, 1, "boom", 15.0, 10.2),
    Cancel("d", 4, 2.0),
]
LATER: list[Record] = [
    Attempt("a", 1, 2, 15.1),  # interrupted
    Schedule("b", 5, "h", 20.0, None, 2.0),
    Attempt("c", 3, 1, 12.0),
    Dead("c", 3, 1, "perm", 12.5),
    Redrive("c", 3, 6, 30.0, 13.0),
]


@pytest.mark.parametrize("compacted", [False, True], ids=["tail", "snapshot+tail"])
async def test_rows_are_made_by_the_callers_factory(db: str, compacted: bool) -> None:
    await write(db, HISTORY)
    if compacted:
        j = await Journal.open(db)
        await j.compact(retention=3600.0, now=20.0)  # every row kept, folded into the snapshot
        await j.close()
    await write(db, LATER)
    j = await Journal.open(db)
    plain = await j.recover()
    made = await j.recover(None, Made)
    await j.close()
    assert all(type(row) is Made for row in made.timers.values())
    assert {k: as_tuple(r) for k, r in made.timers.items()} == {
        k: as_tuple(r) for k, r in plain.timers.items()
    }
    assert (made.max_version, made.interrupted, made.records) == (
        plain.max_version,
        plain.interrupted,
        plain.records,
    )
    assert made.snapshot_rows == (4 if compacted else 0)


@pytest.mark.parametrize("compacted", [False, True], ids=["tail", "snapshot"])
async def test_a_factory_does_not_bypass_the_checks(db: str, compacted: bool) -> None:
    await write(db, HISTORY)
    if compacted:
        j = await Journal.open(db)
        await j.compact(retention=3600.0, now=20.0)
        await j.close()
    table, where = ("snapshot", "key = 'b'") if compacted else ("records", "seq = 3")
    con = sqlite3.connect(db)
    with con:
        (body,) = con.execute(f"SELECT body FROM {table} WHERE {where}").fetchone()
        damaged = body[:5] + bytes([body[5] ^ 1]) + body[6:]  # one bit flipped
        con.execute(f"UPDATE {table} SET body = ? WHERE {where}", (damaged,))
    con.close()
    j = await Journal.open(db)
    with pytest.raises(JournalCorrupt) as caught:
        await j.recover(None, Made)
    await j.close()
    assert ("'b'" in str(caught.value)) if compacted else caught.value.seq == 3, str(caught.value)
