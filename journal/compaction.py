"""Compaction: fold the snapshot and the records up to ``S`` into a new snapshot, online.

Step by step (:meth:`journal.Journal.compact`):

1. ``S`` = the highest committed seq when compaction starts.
2. :func:`plan_sync`, in a worker thread on its own read-only connection and read transaction:
   read the records ``snapshot_seq < seq <= S`` in batches; for each batch load the snapshot rows
   of the keys it touches (only those: the fold is per key), and fold the batch into them.
   The result is the new state of every *touched* key. Finished (SUCCEEDED, CANCELED) rows whose
   ``updated_at`` is older than ``now - retention``, or that are not among the newest
   ``max_retained`` finished rows of the whole new snapshot (by ``(updated_at, key)``), are to be
   deleted, the others upserted. Both rules come down to one cut ``(updated_at, key)``: finished
   rows below it go.
3. :func:`write_plan`, through the writer (so it is serialised with group commits), in ONE
   transaction: delete and upsert those snapshot rows, delete the untouched snapshot rows that
   retention drops (``state IN (SUCCEEDED, CANCELED) AND (updated_at, key) < cut``, in SQL),
   delete the records ``seq <= S``, and store ``snapshot_seq = S``, ``max_version`` and the
   snapshot's row count in ``meta``, then seal ``meta`` (its checksum).

The plan checks what it reads as recovery does (each record's CRC, seq, kind and shape; each
snapshot row it loads, against its columns) and writes every upserted row sealed.

4. If more than two thirds of the file's pages are free, ``PRAGMA incremental_vacuum`` gives
   back all but as many as are in use (room for the next tail; the file is created with
   ``auto_vacuum = INCREMENTAL``) and a passive WAL checkpoint lets the file shrink. So the
   file's size follows the live state down as well as up, within 3x, without churning.

Records committed meanwhile have ``seq > S`` and stay in the tail. A crash at any point leaves
either the old snapshot and all records, or the new snapshot and the records after ``S``: both
recover to the same state. RUNNING rows are kept RUNNING in the snapshot (the snapshot is exactly
the fold of the records it replaces); recovery turns them into PENDING.

The cost is O(records folded + keys they touch) in Python, plus one SQL scan of ``snapshot`` for
retention: untouched live timers are never decoded or rewritten.
"""

from __future__ import annotations

import math
import sqlite3
import time
from dataclasses import dataclass, field
from typing import Any, Final

import msgpack

from journal import codec
from journal.checksum import META_CHECKSUM, meta_checksum
from journal.errors import JournalCorrupt, JournalError
from journal.recovery import fold_sealed
from journal.schema import connect_ro, raise_for, read_meta
from journal.state import FINISHED, STATE_CODE, TimerRow

__all__ = ["CompactionPlan", "CompactionResult", "plan_sync", "write_plan"]

#: Records per batch when planning (each batch loads the snapshot rows of its keys at once).
_PLAN_BATCH: Final = 5_000
#: Keys per ``WHERE key IN (...)`` query (SQLite's default limit is 32766 variables).
_IN_CHUNK: Final = 500
#: Shrink the file only when at least this many pages are free (and 2x the pages in use).
_SHRINK_MIN_PAGES: Final = 256
_FINISHED_CODES: Final = tuple(sorted(STATE_CODE[s] for s in FINISHED))


@dataclass(slots=True)
class CompactionResult:
    """What one compaction did."""

    live_rows: int  #: rows in the snapshot afterwards
    removed_records: int  #: records deleted from the tail (folded into the snapshot)
    seconds: float
    dropped_timers: int = 0  #: finished timers dropped by retention
    snapshot_seq: int = 0  #: S: the highest seq folded into the snapshot
    max_version: int = 0
    #: of ``seconds``: how long the writer was held (group commits waited meanwhile)
    write_seconds: float = 0.0


@dataclass(slots=True)
class CompactionPlan:
    """The snapshot changes computed off the writer; applied by :func:`write_plan`."""

    upto_seq: int
    cutoff: float  #: finished rows with (updated_at, key) < (cutoff, cut_key) are dropped
    max_version: int
    cut_key: str = ""
    upserts: list[tuple[str, int, float, bytes]] = field(default_factory=list)
    deletes: list[tuple[str]] = field(default_factory=list)
    folded: int = 0


def _load_rows(con: sqlite3.Connection, keys: list[str], timers: dict[str, TimerRow]) -> None:
    for i in range(0, len(keys), _IN_CHUNK):
        chunk = keys[i : i + _IN_CHUNK]
        marks = ",".join("?" * len(chunk))
        for key, state, updated_at, body in con.execute(
            f"SELECT key, state, updated_at, body FROM snapshot WHERE key IN ({marks})", chunk
        ):
            timers[key] = codec.decode_row(key, state, updated_at, body)


def plan_sync(
    path: str, upto_seq: int, cutoff: float, max_retained: int | None = None
) -> CompactionPlan:
    """Step 2: fold the snapshot rows touched by records ``<= upto_seq`` (read-only)."""
    con = connect_ro(path)
    try:
        try:
            con.execute("BEGIN")
            meta = read_meta(con, path)
            if not meta.sealed:  # a writable open has migrated it
                raise JournalError(f"journal schema {meta.schema_version} is not writable: {path}")
            timers: dict[str, TimerRow] = {}
            loaded: set[str] = set()
            max_version = meta.max_version
            folded = 0
            cur = con.execute(
                "SELECT kind, body FROM records WHERE seq > ? AND seq <= ? ORDER BY seq",
                (meta.snapshot_seq, upto_seq),
            )
            unpackb = msgpack.unpackb
            while rows := cur.fetchmany(_PLAN_BATCH):
                fresh: set[str] = set()
                for _kind, blob in rows:
                    try:  # a sealed record: [fields, kind, seq, crc]; fields[0] is the key
                        key = unpackb(blob, raw=False, use_list=False, strict_map_key=True)[0][0]
                    except Exception:  # fold_sealed below names the damaged record
                        continue
                    if type(key) is str and key not in loaded:
                        fresh.add(key)
                loaded |= fresh
                _load_rows(con, list(fresh), timers)
                max_version = fold_sealed(timers, rows, meta.snapshot_seq + folded, max_version)
                folded += len(rows)
            last = meta.snapshot_seq + folded
            if last < upto_seq:  # every record up to upto_seq is committed, so must be here
                raise JournalCorrupt(f"record {last + 1}: missing: {path}", seq=last + 1)
            cut = (cutoff, "")  # (updated_at, key) < (cutoff, "") is updated_at < cutoff
            if max_retained is not None:
                cut = max(cut, _retained_cut(con, timers, cutoff, max_retained))
            con.execute("COMMIT")
        except sqlite3.Error as exc:
            raise raise_for(exc, path, "compacting") from exc
    finally:
        con.close()
    plan = CompactionPlan(upto_seq, cut[0], max_version, cut_key=cut[1])
    plan.folded = folded
    pack = msgpack.Packer(use_bin_type=True, autoreset=True).pack  # this thread's own
    for row in timers.values():
        if row.state in FINISHED and (row.updated_at, row.key) < cut:
            plan.deletes.append((row.key,))
        else:
            plan.upserts.append(codec.encode_row(row, pack))
    plan.upserts.sort()  # key order: the snapshot's index is written sequentially
    return plan


def _retained_cut(
    con: sqlite3.Connection, touched: dict[str, TimerRow], cutoff: float, limit: int
) -> tuple[float, str]:
    """The ``(updated_at, key)`` of the oldest finished row that ``limit`` still keeps, over the
    new snapshot: the untouched rows as stored plus the ``touched`` rows as folded. Only rows
    from ``cutoff`` on count (older ones go anyway); ``(cutoff, "")`` when all of them fit."""
    fresh = [
        (row.updated_at, row.key)
        for row in touched.values()
        if row.state in FINISHED and row.updated_at >= cutoff
    ]
    marks = ",".join("?" * len(_FINISHED_CODES))
    where = f"state IN ({marks}) AND updated_at >= ?"
    (stored,) = con.execute(
        f"SELECT count(*) FROM snapshot WHERE {where}", (*_FINISHED_CODES, cutoff)
    ).fetchone()
    if stored + len(fresh) <= limit:  # an upper bound (touched keys count twice): all fit
        return cutoff, ""
    if limit == 0:
        return math.inf, ""
    # The newest `limit` untouched rows are among the newest `limit + len(touched)` stored ones.
    newest = con.execute(
        f"SELECT updated_at, key FROM snapshot WHERE {where}"
        " ORDER BY updated_at DESC, key DESC LIMIT ?",
        (*_FINISHED_CODES, cutoff, limit + len(touched)),
    ).fetchall()
    candidates = [entry for entry in newest if entry[1] not in touched]
    candidates.extend(fresh)
    if len(candidates) < limit:
        return cutoff, ""
    candidates.sort(reverse=True)
    updated_at, key = candidates[limit - 1]
    return float(updated_at), key


async def write_plan(conn: Any, plan: CompactionPlan, started: float) -> CompactionResult:
    """Step 3, on the writer's aiosqlite connection: one transaction, committed here."""
    write_started = time.perf_counter()
    await conn.executemany("DELETE FROM snapshot WHERE key = ?", plan.deletes)
    dropped = len(plan.deletes)  # touched timers that retention drops
    await conn.executemany(
        "INSERT OR REPLACE INTO snapshot (key, state, updated_at, body) VALUES (?, ?, ?, ?)",
        plan.upserts,
    )
    marks = ",".join("?" * len(_FINISHED_CODES))
    cur = await conn.execute(
        f"DELETE FROM snapshot WHERE state IN ({marks}) AND (updated_at, key) < (?, ?)",
        (*_FINISHED_CODES, plan.cutoff, plan.cut_key),
    )
    dropped += max(cur.rowcount, 0)
    cur = await conn.execute("DELETE FROM records WHERE seq <= ?", (plan.upto_seq,))
    removed = max(cur.rowcount, 0)
    await conn.execute(
        "UPDATE meta SET value = max(value, ?) WHERE name = 'snapshot_seq'", (plan.upto_seq,)
    )
    await conn.execute(
        "UPDATE meta SET value = max(value, ?) WHERE name = 'max_version'", (plan.max_version,)
    )
    cur = await conn.execute("SELECT count(*) FROM snapshot")
    (live,) = await cur.fetchone()
    await _seal_meta(conn, int(live))
    await conn.commit()
    await _shrink(conn)
    return CompactionResult(
        live_rows=int(live),
        removed_records=removed,
        seconds=time.perf_counter() - started,
        write_seconds=time.perf_counter() - write_started,
        dropped_timers=dropped,
        snapshot_seq=plan.upto_seq,
        max_version=plan.max_version,
    )


async def _seal_meta(conn: Any, snapshot_rows: int) -> None:
    """Store the snapshot's row count and seal ``meta`` (:func:`journal.checksum.seal_meta`,
    on the writer's aiosqlite connection)."""
    await conn.execute(
        "INSERT OR REPLACE INTO meta (name, value) VALUES ('snapshot_rows', ?)", (snapshot_rows,)
    )
    # For people (``wheel-engine status``), never acted on: the wall clock, not the engine's.
    await conn.execute(
        "INSERT OR REPLACE INTO meta (name, value) VALUES ('compacted_at', ?)", (time.time(),)
    )
    cur = await conn.execute("SELECT name, value FROM meta")
    meta = dict(await cur.fetchall())
    await conn.execute(
        "INSERT OR REPLACE INTO meta (name, value) VALUES (?, ?)",
        (META_CHECKSUM, meta_checksum(meta)),
    )


async def _shrink(conn: Any) -> None:
    """Step 4: give free pages back when they are more than twice the pages in use.

    Incremental vacuum moves pages from the end of the file into free slots and truncates; in
    WAL mode the file shrinks at the next checkpoint (tried here, passively: never waits for
    readers). Its own transactions, after the compaction's commit: a failure here loses nothing.
    """
    cur = await conn.execute("PRAGMA freelist_count")
    (free,) = await cur.fetchone()
    cur = await conn.execute("PRAGMA page_count")
    (pages,) = await cur.fetchone()
    used = pages - free
    if free < _SHRINK_MIN_PAGES or free <= 2 * used:
        return
    # Keep as many free pages as are in use: room for the next tail without regrowing.
    # executescript steps the statement to the end (execute() would free only one page).
    n = int(free - used)
    await conn.executescript(f"PRAGMA incremental_vacuum({n}); PRAGMA wal_checkpoint(PASSIVE);")
