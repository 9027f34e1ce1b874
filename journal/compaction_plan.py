"""Compaction's plan (step 2 of :mod:`journal.compaction`), piece by piece, off the writer.

A :class:`Planner` folds the records ``snapshot_seq < seq <= S`` in seq order, at most
``piece`` records per call of :meth:`Planner.next_piece`, each call in a read transaction of
its own on one read-only connection. A piece is what an ordinary compaction up to the piece's
last seq ``S_i`` would write: the new row of every key its records touch, folded up to
``S_i``. The keys touched by earlier pieces are folded on in memory (their rows stay in the
planner), the others are loaded from the snapshot when first touched: untouched by the pieces
written so far, their stored row is still the one to fold into. So after the writer has stored
pieces ``1..i``, the snapshot and ``meta`` are exactly those of a compaction up to ``S_i``.

Retention drops nothing before the last piece: its cut is computed over the whole new snapshot
in the last piece's read transaction, as a single plan would, so the result is the same.
"""

from __future__ import annotations

import math
import sqlite3
from dataclasses import dataclass, field
from typing import Final

import msgpack

from journal import codec
from journal.errors import JournalCorrupt, JournalError
from journal.recovery import fold_sealed
from journal.schema import connect_ro, raise_for, read_meta
from journal.state import FINISHED, STATE_CODE, TimerRow

__all__ = ["FINISHED_CODES", "PIECE_RECORDS", "CompactionPlan", "Planner"]

#: Records folded per piece at most; a piece is one write transaction of the writer, so group
#: commits wait for one piece at a time (its upserts are at most this many rows). Small: a
#: schedule() that commits during a compaction waits out the piece being written, and more
#: pieces cost little more in all (each is a few statements).
PIECE_RECORDS: Final = 512
#: Records per batch when planning (each batch loads the snapshot rows of its keys at once, and
#: is decoded at once). Small, as the collector's oldest generation takes in whatever the plan
#: still holds when the loop's allocations trigger a collection: only the loop's speed counts.
_PLAN_BATCH: Final = 500
#: Keys per ``WHERE key IN (...)`` query (SQLite's default limit is 32766 variables).
_IN_CHUNK: Final = 500
FINISHED_CODES: Final = tuple(sorted(STATE_CODE[s] for s in FINISHED))


@dataclass(slots=True)
class CompactionPlan:
    """One piece of the snapshot changes, computed off the writer; applied by
    :func:`journal.compaction.write_piece`. Only the ``final`` piece applies retention."""

    upto_seq: int  #: ``S_i``: the highest seq this piece folds
    cutoff: float  #: finished rows with (updated_at, key) < (cutoff, cut_key) are dropped
    max_version: int
    cut_key: str = ""
    upserts: list[tuple[str, int, float, bytes]] = field(default_factory=list)
    deletes: list[tuple[str]] = field(default_factory=list)
    #: (final piece) stored rows retention drops that no record of this compaction touched:
    #: deleted after it, a piece's size at a time (:func:`journal.compaction.drop_expired`)
    expired: list[tuple[str]] = field(default_factory=list)
    folded: int = 0
    final: bool = True
    #: the snapshot's row count once a piece that is not ``final`` is stored (the last piece
    #: counts the rows in SQL, after retention)
    snapshot_rows: int = 0
    #: ``meta`` as the compaction found it: only its pieces change it meanwhile, so a piece
    #: seals its own values with the others without reading them back
    meta: dict[str, object] = field(default_factory=dict)


def _load_rows(con: sqlite3.Connection, keys: list[str], timers: dict[str, TimerRow]) -> None:
    for i in range(0, len(keys), _IN_CHUNK):
        chunk = keys[i : i + _IN_CHUNK]
        marks = ",".join("?" * len(chunk))
        for key, state, updated_at, body in con.execute(
            f"SELECT key, state, updated_at, body FROM snapshot WHERE key IN ({marks})", chunk
        ):
            timers[key] = codec.decode_row(key, state, updated_at, body)


class Planner:
    """Step 2 in pieces, up to ``upto_seq``. Synchronous: call it from one worker thread at a
    time, and store each piece (all of it, committed) before asking for the next one, for the
    next one reads the snapshot as the earlier ones left it. :meth:`close` when done."""

    def __init__(
        self,
        path: str,
        upto_seq: int,
        cutoff: float,
        max_retained: int | None = None,
        piece: int = PIECE_RECORDS,
    ) -> None:
        if piece < 1:
            raise ValueError(f"piece must be >= 1, not {piece!r}")
        self._path = path
        self._upto = upto_seq
        self._cutoff = cutoff
        self._max_retained = max_retained
        self._piece = piece
        # This piece's touched keys' rows, folded so far, and the keys looked up in the snapshot
        # for it: forgotten once the piece is planned (see next_piece).
        self._timers: dict[str, TimerRow] = {}
        self._loaded: set[str] = set()
        self._unstored: set[str] = set()  # looked up, not found, and not written by a piece yet
        self._pack = msgpack.Packer(use_bin_type=True, autoreset=True).pack  # this thread's own
        self._con = connect_ro(path)
        try:
            meta = read_meta(self._con, path)
            if not meta.sealed:  # a writable open has migrated it
                raise JournalError(f"journal schema {meta.schema_version} is not writable: {path}")
            self._meta: dict[str, object] = dict(
                self._con.execute("SELECT name, value FROM meta").fetchall()
            )
        except sqlite3.Error as exc:
            self._con.close()
            raise raise_for(exc, path, "compacting") from exc
        except BaseException:
            self._con.close()
            raise
        self._done = meta.snapshot_seq  # the highest seq folded so far
        self._max_version = meta.max_version
        self._rows = meta.snapshot_rows or 0

    def close(self) -> None:
        self._con.close()

    def next_piece(self) -> CompactionPlan:
        """Fold the next records, at most ``piece`` of them, and return their piece: ``final``
        once it reaches ``upto_seq`` (an empty final piece when there is nothing to fold).
        Raises :class:`JournalCorrupt` for a damaged or missing record, as recovery does."""
        con = self._con
        start = self._done
        end = min(self._upto, start + self._piece)
        final = end >= self._upto
        try:
            con.execute("BEGIN")
            touched = self._fold(end)
            cut = (self._cutoff, "")  # (updated_at, key) < (cutoff, "") is updated_at < cutoff
            if final and self._max_retained is not None:
                cut = max(cut, _retained_cut(con, self._timers, self._cutoff, self._max_retained))
            dropped = _stored_below(con, cut) if final else []
            con.execute("COMMIT")
        except sqlite3.Error as exc:
            raise raise_for(exc, self._path, "compacting") from exc
        plan = CompactionPlan(
            end, cut[0], self._max_version, cut_key=cut[1], final=final, meta=self._meta
        )
        plan.folded = end - start
        timers, unstored, pack = self._timers, self._unstored, self._pack
        for key in touched:
            row = timers.get(key)
            if row is None:  # records of a key that has no row (stale): nothing to store
                continue
            if final and row.state in FINISHED and (row.updated_at, row.key) < cut:
                plan.deletes.append((key,))
                continue
            plan.upserts.append(codec.encode_row(row, pack))
            if key in unstored:
                unstored.discard(key)
                self._rows += 1
        # The stored rows that retention drops, but for this piece's keys (decided above):
        # deleted after this piece's write, a bounded number per transaction.
        plan.expired = [entry for entry in dropped if entry[0] not in touched]
        plan.upserts.sort()  # key order: the snapshot's index is written sequentially
        plan.snapshot_rows = self._rows
        # Written before the next piece is planned, these rows are the snapshot's then: the
        # next piece reads back those it touches. Kept for the whole compaction instead, every
        # key a mass expiry touched stayed alive for its tens of seconds, so the collector
        # moved them to its oldest generation and ran its full collections over them.
        self._timers = {}
        self._loaded = set()
        return plan

    def _fold(self, end: int) -> set[str]:
        """Fold the records ``self._done < seq <= end`` (in the caller's read transaction);
        returns the keys they touch."""
        timers, loaded = self._timers, self._loaded
        touched: set[str] = set()
        cur = self._con.execute(
            "SELECT kind, body FROM records WHERE seq > ? AND seq <= ? ORDER BY seq",
            (self._done, end),
        )
        unpackb = msgpack.unpackb
        while rows := cur.fetchmany(_PLAN_BATCH):
            fresh: set[str] = set()
            for _kind, blob in rows:
                try:  # a sealed record: [fields, kind, seq, crc]; fields[0] is the key
                    key = unpackb(blob, raw=False, use_list=False, strict_map_key=True)[0][0]
                except Exception:  # fold_sealed below names the damaged record
                    continue
                if type(key) is str:
                    touched.add(key)
                    if key not in loaded:
                        fresh.add(key)
            loaded |= fresh
            _load_rows(self._con, list(fresh), timers)
            self._unstored.update(key for key in fresh if key not in timers)
            self._max_version = fold_sealed(timers, rows, self._done, self._max_version)
            self._done += len(rows)
        if self._done < end:  # every record up to upto_seq is committed, so must be here
            raise JournalCorrupt(
                f"record {self._done + 1}: missing: {self._path}", seq=self._done + 1
            )
        return touched


def _stored_below(con: sqlite3.Connection, cut: tuple[float, str]) -> list[tuple[str]]:
    """The keys of the stored finished rows below ``cut``: found here, in the plan's read, so
    that the last piece's write deletes them by key rather than scan the snapshot while it
    holds the writer (only this compaction's pieces write the snapshot meanwhile)."""
    marks = ",".join("?" * len(FINISHED_CODES))
    rows: list[tuple[str]] = con.execute(
        f"SELECT key FROM snapshot WHERE state IN ({marks}) AND (updated_at, key) < (?, ?)",
        (*FINISHED_CODES, *cut),
    ).fetchall()
    return rows


def _retained_cut(
    con: sqlite3.Connection, touched: dict[str, TimerRow], cutoff: float, limit: int
) -> tuple[float, str]:
    """The ``(updated_at, key)`` of the oldest finished row that ``limit`` still keeps, over the
    new snapshot: the untouched rows as stored (earlier pieces' among them) plus the
    ``touched`` rows as folded. Only rows from ``cutoff`` on count (older ones go anyway);
    ``(cutoff, "")`` when all of them fit. (A touched key's stored row is counted too: each is
    counted twice at most, and left out of the candidates.)"""
    fresh = [
        (row.updated_at, row.key)
        for row in touched.values()
        if row.state in FINISHED and row.updated_at >= cutoff
    ]
    marks = ",".join("?" * len(FINISHED_CODES))
    where = f"state IN ({marks}) AND updated_at >= ?"
    (stored,) = con.execute(
        f"SELECT count(*) FROM snapshot WHERE {where}", (*FINISHED_CODES, cutoff)
    ).fetchone()
    if stored + len(fresh) <= limit:  # an upper bound (touched keys count twice): all fit
        return cutoff, ""
    if limit == 0:
        return math.inf, ""
    # The newest `limit` untouched rows are among the newest `limit + len(touched)` stored ones.
    newest = con.execute(
        f"SELECT updated_at, key FROM snapshot WHERE {where}"
        " ORDER BY updated_at DESC, key DESC LIMIT ?",
        (*FINISHED_CODES, cutoff, limit + len(touched)),
    ).fetchall()
    candidates = [entry for entry in newest if entry[1] not in touched]
    candidates.extend(fresh)
    if len(candidates) < limit:
        return cutoff, ""
    candidates.sort(reverse=True)
    updated_at, key = candidates[limit - 1]
    return float(updated_at), key
