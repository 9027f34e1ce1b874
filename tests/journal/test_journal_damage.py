"""Damage: 100+ damaged copies of a real journal either fail to open with a JournalError or open
holding exactly what was committed (guarantee 10). Nothing in between: no changed key, no changed
payload, no record lost with the WAL frames SQLite dropped, and ``check`` reports every copy that
does not open.

The journal is written by a real engine on a real file (a snapshot, a tail partly checkpointed
into the file and partly still in the WAL) and copied while the engine is open. Each case damages
a copy in one way (seeded, so every run damages the same bytes) and opens it like the engine and
the CLI do.
"""

from __future__ import annotations

import asyncio
import random
import shutil
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from journal import Journal, JournalError, TimerRow
from wheel_engine import Engine, Firing, RetryPolicy
from wheel_engine.testing import VirtualClock

SIDECARS = ("-wal", "-hwm")
PAGE = 4096  # SQLite's default page size, which the journal keeps
WAL_HEADER = 32
FRAME = 24 + PAGE


@dataclass(frozen=True)
class Original:
    """The journal's files as copied from the running engine, and what they hold."""

    db: bytes
    wal: bytes
    hwm: bytes | None
    timers: dict[str, TimerRow]


async def _write_journal(path: Path) -> dict[str, Any]:
    """A few hundred timers through a real engine: fired, failed, retried, dead, cancelled,
    compacted and checkpointed into the main file, then more of each after that, left in the
    WAL. Copies the files while the engine is open."""
    clock = VirtualClock()
    engine = Engine(path, clock=clock, durability="normal", retention=1e9)

    @engine.handler("ok")
    async def ok(firing: Firing) -> None:
        pass

    @engine.handler("boom", retry=RetryPolicy(max_attempts=2, initial=1.0, jitter=False))
    async def boom(firing: Firing) -> None:
        raise RuntimeError(f"boom {firing.key}")

    async with engine:
        for wave in range(2):
            for i in range(200):
                handler = "boom" if i % 10 == 0 else "ok"
                payload = {"order": f"A{wave}-{i}", "lines": [i, "x" * (i % 7)]}
                await engine.schedule(handler, delay=1 + i % 50, key=f"s{wave}{i}", payload=payload)
            for i in range(0, 200, 7):
                await engine.cancel(f"s{wave}{i}")
            await clock.advance(25)  # about half fire; the boom ones retry, some die
            if wave == 0:
                await engine.compact()
                _checkpoint(path)
        assert engine.journal is not None
        await engine.journal.flush()
        files = {s: _read(Path(f"{path}{s}")) for s in ("", *SIDECARS)}
        memory = {
            key: engine.get(key) for key in (f"s{w}{i}" for w in range(2) for i in range(200))
        }
        await clock.advance(100)  # let the rest finish so that close() has nothing to wait for
    return {"files": files, "memory": memory}


def _checkpoint(path: Path) -> None:
    """What any reader (the CLI, a backup) may do: move the WAL's pages into the main file."""
    con = sqlite3.connect(path)
    con.execute("PRAGMA wal_checkpoint(PASSIVE)")
    con.close()


def _read(path: Path) -> bytes | None:
    return path.read_bytes() if path.exists() else None  # (no -hwm before schema 2)


def _write_copy(directory: Path, db: bytes, wal: bytes | None, hwm: bytes | None) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "timers.db"
    path.write_bytes(db)
    for suffix, data in (("-wal", wal), ("-hwm", hwm)):
        if data is not None:
            Path(f"{path}{suffix}").write_bytes(data)
    return path


async def _recover(path: Path, *, readonly: bool = False) -> dict[str, TimerRow]:
    journal = await Journal.open(path, readonly=readonly)
    try:
        return (await journal.recover()).timers
    finally:
        await journal.close()


async def _check_ok(path: Path) -> bool:
    journal = await Journal.open(path, readonly=True)
    try:
        return (await journal.check()).ok
    finally:
        await journal.close()


@pytest.fixture(scope="module")
def original(tmp_path_factory: pytest.TempPathFactory) -> Original:
    base = tmp_path_factory.mktemp("damage")
    written = asyncio.run(_write_journal(base / "live.db"))
    files = written["files"]
    assert len(files["-wal"]) > 10 * FRAME, "some commits must still be in the WAL"
    pristine = _write_copy(base / "pristine", files[""], files["-wal"], files["-hwm"])
    timers = asyncio.run(_recover(pristine, readonly=True))
    # The copy holds exactly what the engine had committed (and shows in memory).
    for key, info in written["memory"].items():
        row = timers[key]
        assert (row.version, row.state, row.attempts, row.last_error) == (
            info.version,
            info.state,
            info.attempts,
            info.last_error,
        ), key
    assert {row.state for row in timers.values()} >= {"PENDING", "SUCCEEDED", "CANCELED", "DEAD"}
    return Original(files[""], files["-wal"], files["-hwm"], timers)


# -- the damage -------------------------------------------------------------------------------
#
# A case is (name, target, how, where): where is a fraction of the target's length (or a key
# or a record), turned into an offset once the files exist.

_rng = random.Random(20261201)


def _flip_cases(target: str, n: int) -> list[tuple[str, str, str, Any]]:
    return [
        (f"flip-{target}-{i}", target, "flip", (_rng.random(), _rng.randrange(1, 256)))
        for i in range(n)
    ]


CASES: list[tuple[str, str, str, Any]] = [
    *_flip_cases("db", 40),
    *_flip_cases("wal", 40),
    *[(f"truncate-db-{i}", "db", "truncate", _rng.random()) for i in range(6)],
    ("truncate-db-last-page", "db", "truncate-pages", 1),
    *[(f"truncate-wal-{i}", "wal", "truncate", _rng.random()) for i in range(6)],
    ("truncate-wal-last-frame", "wal", "truncate-pages", 1),
    ("truncate-wal-header-only", "wal", "truncate", 0.0),
    *[(f"zero-db-page-{i}", "db", "zero-page", _rng.random()) for i in range(6)],
    *[(f"zero-wal-frame-{i}", "wal", "zero-page", _rng.random()) for i in range(4)],
    ("zero-wal-header", "wal", "zero-header", None),
    ("delete-wal", "wal", "delete", None),
    ("garbage-after-db", "db", "append", 3000),
    ("garbage-after-wal", "wal", "append", 5000),
    ("garbage-page-after-db", "db", "append", PAGE),
    ("delete-first-tail-record", "sql", "delete-record", "first"),
    ("delete-middle-tail-record", "sql", "delete-record", "middle"),
    ("delete-last-record", "sql", "delete-record", "last"),
    ("delete-snapshot-row", "sql", "delete-snapshot-row", None),
    ("rename-snapshot-key", "sql", "rename-snapshot-key", None),
    ("snapshot-state-column", "sql", "snapshot-state", None),
    ("record-kind-column", "sql", "record-kind", None),
    ("meta-snapshot-seq", "sql", "meta-snapshot-seq", None),
    *[(f"key-case-{key}", "bytes", "key-case", key) for key in ("s04", "s174", "s1150", "s00")],
    *[(f"key-last-case-{key}", "bytes", "key-last-case", key) for key in ("s012", "s199")],
    ("payload-utf8", "bytes", "payload-utf8", "A1-33"),
]


def _damage(original: Original, target: str, how: str, where: Any, scratch: Path) -> Path:
    db, wal, hwm = bytearray(original.db), bytearray(original.wal), original.hwm
    data = db if target == "db" else wal
    if how == "flip":
        fraction, xor = where
        data[int(fraction * len(data))] ^= xor
    elif how == "truncate":
        del data[max(WAL_HEADER if target == "wal" else 0, int(where * len(data))) :]
    elif how == "truncate-pages":
        del data[len(data) - where * (FRAME if target == "wal" else PAGE) :]
    elif how == "zero-page":
        if target == "wal":
            start = WAL_HEADER + int(where * (len(wal) - WAL_HEADER) / FRAME) * FRAME
            data[start : start + FRAME] = bytes(FRAME)
        else:
            start = int(where * len(db) / PAGE) * PAGE
            data[start : start + PAGE] = bytes(PAGE)
    elif how == "zero-header":
        data[:WAL_HEADER] = bytes(WAL_HEADER)
    elif how == "append":
        data.extend(random.Random(where).randbytes(where))
    elif how in ("key-case", "key-last-case", "payload-utf8"):
        _change_bytes(db, wal, how, where)
    path = _write_copy(scratch, bytes(db), None if how == "delete" else bytes(wal), hwm)
    if target == "sql":
        _edit_with_sql(path, how, where)
    return path


def _change_bytes(db: bytearray, wal: bytearray, how: str, key: str) -> None:
    """Change one stored byte of a key (or a payload string), in the newest copy of its page."""
    needle = key.encode()
    for data in (wal, db):  # the WAL holds the newer copies of the pages it has
        at = data.rfind(needle) if how == "key-last-case" else data.find(needle)
        if at >= 0:
            if how == "payload-utf8":
                data[at] = 0xFF  # not UTF-8 any more: a raw UnicodeDecodeError on old code
            else:
                data[at] = ord(chr(data[at]).upper())  # s74 -> S74
            return
    raise AssertionError(f"{key!r} is not in the files")


def _edit_with_sql(path: Path, how: str, where: Any) -> None:
    """Edits a hostile operator (or a buggy tool) could make with plain sqlite3."""
    con = sqlite3.connect(path)
    first, last = con.execute("SELECT min(seq), max(seq) FROM records").fetchone()
    snapshot_key = con.execute("SELECT min(key) FROM snapshot").fetchone()[0]
    if how == "delete-record":
        seq = {"first": first, "middle": (first + last) // 2, "last": last}[where]
        con.execute("DELETE FROM records WHERE seq = ?", (seq,))
    elif how == "delete-snapshot-row":
        con.execute("DELETE FROM snapshot WHERE key = ?", (snapshot_key,))
    elif how == "rename-snapshot-key":
        con.execute(
            "UPDATE snapshot SET key = 'S' || substr(key, 2) WHERE key = ?", (snapshot_key,)
        )
    elif how == "snapshot-state":  # a live row marked SUCCEEDED long ago: retention would drop it
        con.execute("UPDATE snapshot SET state = 2, updated_at = 0 WHERE state = 0")
    elif how == "record-kind":
        con.execute("UPDATE records SET kind = 4 WHERE seq = ? AND kind != 4", (last,))
    elif how == "meta-snapshot-seq":
        con.execute("UPDATE meta SET value = value + 5 WHERE name = 'snapshot_seq'")
    con.commit()
    con.close()


@pytest.mark.parametrize(("name", "target", "how", "where"), CASES, ids=[c[0] for c in CASES])
def test_damaged_copy_fails_or_opens_exactly(
    original: Original, tmp_path: Path, name: str, target: str, how: str, where: Any
) -> None:
    path = _damage(original, target, how, where, tmp_path / "copy")
    try:
        check_ok = asyncio.run(_check_ok(path))
    except JournalError:
        check_ok = False
    try:
        timers = asyncio.run(_recover(path))
    except JournalError:
        assert not check_ok, f"{name}: the journal does not open, but check says OK"
        return
    assert timers == original.timers, f"{name}: opened with changed timers"


def test_there_are_over_a_hundred_cases() -> None:
    assert len(CASES) > 100
    assert len({c[0] for c in CASES}) == len(CASES)


def test_a_deleted_wal_without_its_mark_is_not_seen(original: Original, tmp_path: Path) -> None:
    """What the mark cannot cover: the WAL and the mark both gone (a copy of the main file
    alone) opens as a whole journal, just older. Documented in docs/design.md."""
    path = _write_copy(tmp_path / "alone", original.db, None, None)
    timers = asyncio.run(_recover(path))
    assert len(timers) <= len(original.timers)


def test_the_untouched_copy_opens_exactly(original: Original, tmp_path: Path) -> None:
    path = _write_copy(tmp_path / "same", original.db, original.wal, original.hwm)
    assert asyncio.run(_check_ok(path))
    assert asyncio.run(_recover(path)) == original.timers
    shutil.rmtree(tmp_path / "same")
