"""Compaction: fold the snapshot and the records up to ``S`` into a new snapshot, online, in
pieces that each leave a journal compacted up to their last seq.

Step by step (:meth:`journal.Journal.compact`, :func:`compact`):

1. ``S`` = the highest committed seq when compaction starts.
2. The plan (:class:`journal.compaction_plan.Planner`), in a worker thread on its own read-only
   connection: read the records ``snapshot_seq < seq <= S`` in seq order, at most
   :data:`~journal.compaction_plan.PIECE_RECORDS` per piece, each piece in a read transaction
   of its own; for each batch load the snapshot rows of the keys it touches that no earlier
   piece touched (only those: the fold is per key), and fold the batch into the rows. A piece
   is the new state, folded up to the piece's last seq ``S_i``, of every key its records touch.
   In the last piece, finished (SUCCEEDED, CANCELED) rows whose ``updated_at`` is older than
   ``now - retention``, or that are not among the newest ``max_retained`` finished rows of the
   whole new snapshot (by ``(updated_at, key)``), are to be deleted, the others upserted. Both
   rules come down to one cut ``(updated_at, key)``: finished rows below it go. Earlier pieces
   drop nothing.
3. :func:`write_piece`, through the writer (so it is serialised with group commits), ONE
   transaction per piece: upsert the piece's snapshot rows, delete the records ``seq <= S_i``,
   store ``snapshot_seq = S_i``, ``max_version`` and the snapshot's row count in ``meta``, then
   seal ``meta`` (its checksum). The last piece also deletes, by key, the rows retention drops
   among the keys it touched (at most one piece's worth). Between two pieces the writer commits
   what was submitted meanwhile, so no group commit waits longer than one piece's write (the
   whole compaction's, in one piece, would grow with the keys touched since the last one:
   ``docs/design.md`` has the figures).
3b. :func:`drop_expired`, after the last piece: the stored rows its plan found finished below
   the cut that no record of this compaction touched (``state IN (SUCCEEDED, CANCELED) AND
   (updated_at, key) < cut``, read in the plan, not scanned by the write) are deleted by key, at
   most a piece's size of them per transaction, ``meta``'s row count sealed with each. After a
   mass expiry they are most of the snapshot (hundreds of thousands of rows), and one delete of
   them all held the writer, so every commit, for a large fraction of a second. These rows stay
   deletable in any order and at any later time: they are finished and past retention, and no
   record after ``S`` makes them live again without replacing them, so a crash between two such
   transactions leaves a journal that recovers to the same state (only retention is late). The
   touched keys cannot wait so: their stored rows may be older, live states of the records the
   last piece deleted.

The plan checks what it reads as recovery does (each record's CRC, seq, kind and shape; each
snapshot row it loads, against its columns) and writes every upserted row sealed.

4. After the last piece, if more than two thirds of the file's pages are free, ``PRAGMA
   incremental_vacuum`` gives back all but as many as are in use (room for the next tail; the
   file is created with ``auto_vacuum = INCREMENTAL``), :data:`_SHRINK_STEP` pages per writer
   job, and a passive WAL checkpoint lets the file shrink. So the file's size follows the live
   state down as well as up, within 3x, without churning.

Records committed meanwhile have ``seq > S`` and stay in the tail. Each piece's transaction
turns a journal compacted up to ``S_(i-1)`` into one compacted up to ``S_i`` (the snapshot the
fold of the records it replaces, ``meta`` sealed with the right row count), so a crash at any
point leaves the old snapshot and every record after its seq, or the snapshot of some ``S_i``
and the records after it: all recover to the same state. RUNNING rows are kept RUNNING in the
snapshot (the snapshot is exactly the fold of the records it replaces); recovery turns them
into PENDING.

The cost is O(records folded + keys they touch) in Python, plus one SQL scan of ``snapshot`` for
retention, in the plan's read: untouched live timers are never decoded or rewritten. A key that
several pieces touch is written once by each of them (a mass expiry's timers: once scheduled,
once finished).
"""

from __future__ import annotations

import asyncio
import functools
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from journal.checksum import META_CHECKSUM, meta_checksum
from journal.compaction_plan import PIECE_RECORDS, CompactionPlan, Planner

if TYPE_CHECKING:
    from journal.writer import GroupCommitWriter

__all__ = ["CompactionPlan", "CompactionResult", "compact", "drop_expired", "write_piece"]

#: Shrink the file only when at least this many pages are free (and 2x the pages in use).
_SHRINK_MIN_PAGES: Final = 256
#: Pages given back per writer job when shrinking: group commits pass between two of them.
_SHRINK_STEP: Final = 1024


@dataclass(slots=True)
class CompactionResult:
    """What one compaction did."""

    live_rows: int  #: rows in the snapshot afterwards
    removed_records: int  #: records deleted from the tail (folded into the snapshot)
    seconds: float
    dropped_timers: int = 0  #: finished timers dropped by retention
    snapshot_seq: int = 0  #: S: the highest seq folded into the snapshot
    max_version: int = 0
    #: of ``seconds``: how long the writer was held, all pieces (and drops) together
    write_seconds: float = 0.0
    #: the fold's write transactions (pieces); group commits passed between two of them
    pieces: int = 1
    #: retention's write transactions after the last piece (step 3b), group commits between
    drop_pieces: int = 0
    #: the longest of them: the longest a group commit waited for this compaction
    longest_write_seconds: float = 0.0


async def compact(
    path: str,
    writer: GroupCommitWriter,
    cutoff: float,
    max_retained: int | None = None,
    piece: int | None = None,
) -> CompactionResult:
    """Steps 1 to 4: plan and write piece by piece up to the writer's ``last_seq`` now. A
    failure leaves the pieces written before it (each one a compaction of its own) and raises;
    the writer's ``tail_records`` loses each piece's records as it is committed. ``piece``:
    records per piece, :data:`~journal.compaction_plan.PIECE_RECORDS` by default."""
    started = time.perf_counter()
    upto = writer.last_seq
    size = PIECE_RECORDS if piece is None else piece
    planner = await asyncio.to_thread(Planner, path, upto, cutoff, max_retained, size)
    result = CompactionResult(live_rows=0, removed_records=0, seconds=0.0, pieces=0)
    try:
        while True:
            plan = await asyncio.to_thread(planner.next_piece)

            async def job(conn: Any, plan: CompactionPlan = plan) -> CompactionResult:
                return await write_piece(conn, plan)

            done = await writer.run_job(job)
            writer.tail_records -= done.removed_records
            result.pieces += 1
            result.removed_records += done.removed_records
            _held(result, done.write_seconds)
            if plan.final:
                break
    finally:
        planner.close()
    for first in range(0, len(plan.expired), size):  # step 3b
        keys = plan.expired[first : first + size]
        before = done
        drop = functools.partial(drop_expired, plan=plan, keys=keys, live=before.live_rows)
        done = await writer.run_job(drop)
        done.dropped_timers += before.dropped_timers
        result.drop_pieces += 1
        _held(result, done.write_seconds)
    pages = await writer.run_job(_shrink_pages)
    while True:  # step 4 too a bounded piece at a time, the checkpoint last (pages == 0)
        step = min(pages, _SHRINK_STEP)
        step_started = time.perf_counter()
        await writer.run_job(functools.partial(_shrink, pages=step))
        _held(result, time.perf_counter() - step_started)
        if not step:
            break
        pages -= step
    result.live_rows = done.live_rows
    result.dropped_timers = done.dropped_timers
    result.snapshot_seq = done.snapshot_seq
    result.max_version = done.max_version
    result.seconds = time.perf_counter() - started
    return result


def _held(result: CompactionResult, seconds: float) -> None:
    """Count one writer job of ``seconds`` in ``result``."""
    result.write_seconds += seconds
    result.longest_write_seconds = max(result.longest_write_seconds, seconds)


async def write_piece(conn: Any, plan: CompactionPlan) -> CompactionResult:
    """Step 3 for one piece, on the writer's aiosqlite connection: one transaction, committed
    here. ``seconds`` is the write's own. Few statements:
    each await on the connection waits for a turn of the event loop too, while the writer is
    held (and a mass expiry keeps the loop busy)."""
    write_started = time.perf_counter()
    dropped = 0
    if plan.deletes:  # the final piece's only (its touched keys; the others: drop_expired)
        await conn.executemany("DELETE FROM snapshot WHERE key = ?", plan.deletes)
        dropped = len(plan.deletes)
    if plan.upserts:
        await conn.executemany(
            "INSERT OR REPLACE INTO snapshot (key, state, updated_at, body) VALUES (?, ?, ?, ?)",
            plan.upserts,
        )
    cur = await conn.execute("DELETE FROM records WHERE seq <= ?", (plan.upto_seq,))
    removed = max(cur.rowcount, 0)
    live = plan.snapshot_rows
    if plan.final:  # counted after retention (and so a count gone wrong is set right here)
        cur = await conn.execute("SELECT count(*) FROM snapshot")
        (live,) = await cur.fetchone()
    await _seal_meta(conn, plan, int(live))
    await conn.commit()
    seconds = time.perf_counter() - write_started
    return CompactionResult(
        live_rows=int(live),
        removed_records=removed,
        seconds=seconds,
        write_seconds=seconds,
        dropped_timers=dropped,
        snapshot_seq=plan.upto_seq,
        max_version=plan.max_version,
    )


async def drop_expired(
    conn: Any, plan: CompactionPlan, keys: list[tuple[str]], live: int
) -> CompactionResult:
    """Step 3b for ``keys`` (some of ``plan.expired``), ``live`` rows stored before: one
    transaction, committed here, ``meta`` sealed with the row count left."""
    write_started = time.perf_counter()
    cur = await conn.executemany("DELETE FROM snapshot WHERE key = ?", keys)
    live -= max(cur.rowcount, 0)
    await _seal_meta(conn, plan, live)
    await conn.commit()
    seconds = time.perf_counter() - write_started
    return CompactionResult(
        live_rows=live,
        removed_records=0,
        seconds=seconds,
        write_seconds=seconds,
        dropped_timers=len(keys),
        snapshot_seq=plan.upto_seq,
        max_version=plan.max_version,
    )


async def _seal_meta(conn: Any, plan: CompactionPlan, snapshot_rows: int) -> None:
    """Store the piece's ``snapshot_seq``, ``max_version`` and row count in ``meta`` and seal it
    (:func:`journal.checksum.meta_checksum` over the meta the plan found, with these values),
    in one statement."""
    meta = dict(plan.meta)
    meta["snapshot_seq"] = plan.upto_seq  # above the meta's: the records after it were folded
    meta["max_version"] = plan.max_version  # folded on from the meta's
    meta["snapshot_rows"] = snapshot_rows
    # For people (``wheel-engine status``), never acted on: the wall clock, not the engine's.
    meta["compacted_at"] = time.time()
    meta[META_CHECKSUM] = meta_checksum(meta)
    names = ("snapshot_seq", "max_version", "snapshot_rows", "compacted_at", META_CHECKSUM)
    await conn.executemany(
        "INSERT OR REPLACE INTO meta (name, value) VALUES (?, ?)",
        [(name, meta[name]) for name in names],
    )


async def _shrink_pages(conn: Any) -> int:
    """Step 4: how many free pages to give back: none unless they are more than twice the
    pages in use (and at least :data:`_SHRINK_MIN_PAGES`), else all but as many as are in use
    (room for the next tail without regrowing)."""
    cur = await conn.execute("PRAGMA freelist_count")
    (free,) = await cur.fetchone()
    cur = await conn.execute("PRAGMA page_count")
    (pages,) = await cur.fetchone()
    used = pages - free
    if free < _SHRINK_MIN_PAGES or free <= 2 * used:
        return 0
    return int(free - used)


async def _shrink(conn: Any, pages: int) -> None:
    """Give ``pages`` free pages back (``pages == 0``: checkpoint, so that the file shrinks).

    Incremental vacuum moves pages from the end of the file into free slots and truncates; in
    WAL mode the file shrinks at the next checkpoint (passive: never waits for readers). Its own
    transactions, after the compaction's last commit: a failure here loses nothing.
    """
    if pages:
        # executescript steps the statement to the end (execute() would free only one page).
        await conn.executescript(f"PRAGMA incremental_vacuum({pages});")
    else:
        await conn.executescript("PRAGMA wal_checkpoint(PASSIVE);")
