"""Micro benchmarks of the journal: codec, group commit vs raw sqlite3, recovery vs raw read.

Run: ``.venv/bin/python -m pytest bench/test_bench_journal.py --benchmark-only -q``
Each journal figure has its raw-sqlite3 baseline in the same run (same file settings), so the
ratio is what to look at; absolute numbers depend on the disk (fsync) and the CPU.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import aiosqlite
import msgpack
import pytest

from journal import Journal, codec, inserts, schema
from journal.records import Ack, Attempt, Record, Retry, Schedule
from journal.recovery import recover_sync

RECOVERY_RECORDS = 100_000
BATCH = 1_000


def _record(i: int) -> Record:
    key = f"order:{i // 4}"
    version = i // 4 + 1
    at = 1_800_000_000.0 + i
    match i % 4:
        case 0:
            return Schedule(key, version, "orders.cancel", at + 1800.0, b"\x81\xa5order\xa2A1", at)
        case 1:
            return Attempt(key, version, 1, at)
        case 2:
            return Retry(key, version, 1, "TimeoutError()", at + 2.0, at)
        case _:
            return Ack(key, version, at)


RECORDS = [_record(i) for i in range(BATCH)]
SCHEDULE = RECORDS[0]


# -- codec ------------------------------------------------------------------------------------


def test_codec_encode(benchmark: Any) -> None:
    benchmark(codec.encode, SCHEDULE)


def test_codec_decode(benchmark: Any) -> None:
    kind, body = codec.encode(SCHEDULE)
    benchmark(codec.decode, kind, body)


def test_codec_seal_record(benchmark: Any) -> None:
    """What the writer adds per record at commit: the seq, the kind and the CRC sealed in."""
    kind, body = codec.encode(SCHEDULE)
    benchmark(codec.seal_record, 1_000_000, kind, body)


def test_codec_raw_msgpack_packb(benchmark: Any) -> None:
    """Baseline for encode: msgpack alone, no shape check."""
    benchmark(msgpack.packb, SCHEDULE, use_bin_type=True)


_KINDS, _BODIES = map(list, zip(*codec.encode_many(RECORDS), strict=True))
_SEALED = list(codec.seal_params(1, _KINDS, _BODIES, 0, len(_BODIES), 1))  # [seq, kind, sealed]
_INSERT_BODY = "INSERT INTO records (kind, body) VALUES (?, ?)"


def _insert_batch(benchmark: Any, path: Path, rows: list[tuple[int, Any]]) -> None:
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=OFF")  # the binding and the insert, not the disk
    con.execute("CREATE TABLE records (seq INTEGER PRIMARY KEY, kind INTEGER, body BLOB)")

    def insert() -> None:
        con.execute("BEGIN")
        con.executemany(_INSERT_BODY, rows)
        con.execute("COMMIT")

    benchmark(insert)
    con.close()


def test_insert_a_sealed_batch(benchmark: Any, tmp_path: Path) -> None:
    """1,000 sealed records as the writer binds them: ``bytearray`` s, which sqlite3 binds at
    once (``codec.seal_params``)."""
    _insert_batch(benchmark, tmp_path / "t.db", [(kind, record) for _, kind, record in _SEALED])


def test_insert_a_sealed_batch_as_bytes(benchmark: Any, tmp_path: Path) -> None:
    """Baseline: the same records as ``bytes`` (how the writer bound them before), which
    sqlite3 sends through its adapter registry first."""
    rows = [(kind, bytes(record)) for _, kind, record in _SEALED]
    _insert_batch(benchmark, tmp_path / "t.db", rows)


def _seal_and_insert(benchmark: Any, path: Path, by_statements: bool) -> None:
    """What the writer does with a batch of 1,000 rows inside its transaction: seal each and
    insert it, new seqs each round (the seq is the table's key), ``synchronous=OFF``."""
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=OFF")  # the sealing, binding and inserting, not the disk
    con.execute("CREATE TABLE records (seq INTEGER PRIMARY KEY, kind INTEGER, body BLOB)")
    kinds, bodies = _KINDS, _BODIES
    first = [1]

    def insert() -> None:
        con.execute("BEGIN")
        if by_statements:
            for per, sql, start, stop in inserts.statements(len(bodies)):
                con.executemany(sql, codec.seal_params(first[0], kinds, bodies, start, stop, per))
        else:
            one_each = codec.seal_params(first[0], kinds, bodies, 0, len(bodies), 1)
            con.executemany(inserts.INSERT_SQL, one_each)
        con.execute("COMMIT")
        first[0] += len(bodies)

    benchmark(insert)
    con.close()


def test_seal_and_insert_1000_rows_by_statements(benchmark: Any, tmp_path: Path) -> None:
    """As the writer inserts: 256 rows a statement, then 16, then one (``journal.inserts``)."""
    _seal_and_insert(benchmark, tmp_path / "t.db", by_statements=True)


def test_seal_and_insert_1000_rows_one_by_one(benchmark: Any, tmp_path: Path) -> None:
    """Baseline: ``executemany`` of the one-row INSERT, as the writer inserted before."""
    _seal_and_insert(benchmark, tmp_path / "t.db", by_statements=False)


# -- commit batching --------------------------------------------------------------------------


@pytest.mark.parametrize("durability", ["full", "normal"])
def test_commit_1000_records_journal(
    benchmark: Any, tmp_path: Path, loop: asyncio.AbstractEventLoop, durability: str
) -> None:
    """One submit of 1,000 records: encode + one executemany + commit, through aiosqlite."""
    j = loop.run_until_complete(Journal.open(tmp_path / "j.db", durability=durability))  # type: ignore[arg-type]
    benchmark(lambda: loop.run_until_complete(j.submit(RECORDS)))
    loop.run_until_complete(j.close())


@pytest.mark.parametrize("durability", ["full", "normal"])
def test_commit_1000_records_raw_sqlite3(benchmark: Any, tmp_path: Path, durability: str) -> None:
    """Baseline: the same rows (pre-encoded) with plain sqlite3 executemany + commit."""
    path = tmp_path / "raw.db"
    schema.create_file(str(path))
    schema.ensure_schema(str(path))  # the journal's tables, WAL mode
    con = sqlite3.connect(path)
    con.execute(f"PRAGMA synchronous = {durability.upper()}")
    rows = codec.encode_many(RECORDS)
    seq = [0]

    def commit() -> None:
        first = seq[0]
        con.executemany(
            "INSERT INTO records (seq, kind, body) VALUES (?, ?, ?)",
            [(first + i + 1, k, b) for i, (k, b) in enumerate(rows)],
        )
        con.commit()
        seq[0] = first + len(rows)

    benchmark(commit)
    con.close()


def test_group_commit_1000_concurrent_submits(
    benchmark: Any, tmp_path: Path, loop: asyncio.AbstractEventLoop
) -> None:
    """1,000 tasks each awaiting submit([one record]): what a busy engine does."""
    j = loop.run_until_complete(Journal.open(tmp_path / "g.db", durability="full"))
    commits: list[int] = []
    j.on_commit = lambda n, dt: commits.append(n)

    async def burst() -> None:
        await asyncio.gather(*(j.submit([r]) for r in RECORDS))

    benchmark(lambda: loop.run_until_complete(burst()))
    benchmark.extra_info["commits_per_1000_submits"] = len(commits) / max(
        1, benchmark.stats.stats.rounds
    )
    loop.run_until_complete(j.close())


# -- recovery ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def journal_100k(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("rec") / "rec.db")

    async def build() -> None:
        j = await Journal.open(path, durability="normal")
        for start in range(0, RECOVERY_RECORDS, 10_000):
            await j.submit([_record(i) for i in range(start, start + 10_000)])
        await j.close()

    asyncio.run(build())
    return path


def test_recovery_100k_journal(benchmark: Any, journal_100k: str) -> None:
    rec = benchmark(recover_sync, journal_100k)
    assert rec.records == RECOVERY_RECORDS
    benchmark.extra_info["rows_per_second"] = RECOVERY_RECORDS / benchmark.stats.stats.mean


@pytest.fixture(scope="module")
def snapshot_100k(tmp_path_factory: pytest.TempPathFactory) -> str:
    """100k live timers, all in the snapshot (a compacted journal)."""
    path = str(tmp_path_factory.mktemp("snap") / "snap.db")

    async def build() -> None:
        j = await Journal.open(path, durability="normal")
        for start in range(0, RECOVERY_RECORDS, 10_000):
            await j.submit([_record(i * 4) for i in range(start, start + 10_000)])  # schedules
        await j.compact(retention=0.0, now=0.0)
        await j.close()

    asyncio.run(build())
    return path


def test_recovery_100k_snapshot_rows(benchmark: Any, snapshot_100k: str) -> None:
    rec = benchmark(recover_sync, snapshot_100k)
    assert rec.snapshot_rows == RECOVERY_RECORDS
    benchmark.extra_info["rows_per_second"] = RECOVERY_RECORDS / benchmark.stats.stats.mean


def test_recovery_100k_raw_read_decode(benchmark: Any, journal_100k: str) -> None:
    """Baseline: sqlite3 fetch + msgpack decode of every body, no checks, no fold."""

    def raw() -> int:
        con = sqlite3.connect(journal_100k)
        n = 0
        unpackb = msgpack.unpackb
        cur = con.execute("SELECT seq, kind, body FROM records ORDER BY seq")
        while rows := cur.fetchmany(50_000):
            for _seq, _kind, body in rows:
                unpackb(body, raw=False, use_list=False, strict_map_key=True)
            n += len(rows)
        con.close()
        return n

    assert benchmark(raw) == RECOVERY_RECORDS
    benchmark.extra_info["rows_per_second"] = RECOVERY_RECORDS / benchmark.stats.stats.mean


def test_read_decode_100k_via_aiosqlite(benchmark: Any, journal_100k: str) -> None:
    """Why recovery reads with plain sqlite3 in a thread: the same read through aiosqlite."""

    async def read() -> int:
        n = 0
        async with aiosqlite.connect(journal_100k) as con:
            cur = await con.execute("SELECT seq, kind, body FROM records ORDER BY seq")
            while rows := await cur.fetchmany(50_000):
                for _seq, _kind, body in rows:
                    msgpack.unpackb(body, raw=False, use_list=False, strict_map_key=True)
                    n += 1
        return n

    assert benchmark(lambda: asyncio.run(read())) == RECOVERY_RECORDS


def test_compaction_100k(benchmark: Any, tmp_path: Path) -> None:
    """Open + compact 100k tail records (25k timers, all finished, kept) + close."""
    counter = [0]

    def setup() -> tuple[tuple[str], dict[str, Any]]:
        counter[0] += 1
        path = str(tmp_path / f"c{counter[0]}.db")

        async def build() -> None:
            j = await Journal.open(path, durability="normal")
            for start in range(0, RECOVERY_RECORDS, 10_000):
                await j.submit([_record(i) for i in range(start, start + 10_000)])
            await j.close()

        asyncio.run(build())
        return (path,), {}

    async def compact(path: str) -> None:
        j = await Journal.open(path, durability="normal")
        res = await j.compact(retention=1e12, now=0.0)
        assert res.removed_records == RECOVERY_RECORDS
        await j.close()

    benchmark.pedantic(lambda path: asyncio.run(compact(path)), setup=setup, rounds=3)
