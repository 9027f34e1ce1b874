"""A journal file's live state, kept in memory and brought up to date from the journal's tail.

The console must answer its overview on a 1,000,000-timer journal in well under a second, but
the SQLite journal has no index on a timer's handler, state or due time (those live inside each
row's sealed body, :mod:`journal.schema`): counting them with SQL would read every row per
request. So the console reads the journal once, through the same read-only recovery the CLI
uses (:func:`journal.recovery.recover_sync`, which checks every checksum), and then keeps the
counts itself:

- ``counts[(handler, state)]`` and ``dead[(handler, first line of the error)]``, adjusted per
  record by looking at the key's row before and after the journal's own fold rule
  (:func:`journal.rules.apply`) ran on it;
- ``pending``: a sorted list of ``(due, version, key)`` of PENDING timers, so "how many come due
  in each 5 minutes of the next hour" is a few bisections, not a scan;
- ``keys``: every key, sorted, for the timers list: a key prefix is a bisection, the next page
  starts after the last key shown (keyset paging, never an offset); and ``by_state``, the keys
  of the states an operator looks for and that stay few (DEAD, RUNNING), sorted the same way,
  so "the dead ones" never walks the million pending ones.

Worked example: the view has read up to seq 120. A request arrives; ``refresh`` asks SQLite for
``max(seq)`` (one b-tree descent): 123. It reads records 121..123 (``seq > 120``, the primary
key), say an Attempt, an Ack and a Schedule: the first moves key ``a`` from (h, PENDING) to
(h, RUNNING), so ``counts`` loses one and gains one and ``a`` leaves ``pending``; the Ack moves it
to SUCCEEDED; the Schedule adds ``b`` to ``counts``, ``pending`` and ``keys``. Three records,
a few dictionary and list operations: the overview then reads only these structures.

Compaction moves the journal's snapshot: records the view already folded are deleted and
finished timers may be dropped (retention). When the snapshot moved but not past what the view
has read, the view keeps answering from its own state and rebuilds itself in the background
(then swaps); when it moved past (records the view never saw were folded away), the next read
waits for the rebuild. Everything here runs in worker threads, under one lock.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any, Final

from sortedcontainers import SortedList

from journal import codec
from journal.records import Ack, Attempt, Dead, Record, Retry
from journal.recovery import as_journaled, recover_sync
from journal.rules import apply
from journal.schema import connect_ro, raise_for, read_meta
from journal.state import DEAD, PENDING, RUNNING, TimerRow, TimerState

__all__ = ["ERROR_WIDTH", "INDEXED", "JournalView", "ViewState", "first_line"]

log = logging.getLogger(__name__)

#: Characters of an error's first line kept for "DEAD by handler and last error".
ERROR_WIDTH: Final = 160
#: Recent lateness and duration samples kept, per handler.
SAMPLES: Final = 1_000
_BATCH: Final = 1_000
#: States whose keys get a sorted list of their own (few, and what an operator filters for).
INDEXED: Final = (DEAD, RUNNING)


def first_line(text: str | None, width: int = ERROR_WIDTH) -> str:
    """The first non-empty line of an error, cut to ``width`` characters."""
    if not text:
        return ""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    line = lines[0].strip() if lines else ""
    return line if len(line) <= width else line[: width - 1] + "…"


@dataclass(slots=True)
class ViewState:
    """One consistent picture of the journal (swapped whole by a rebuild)."""

    timers: dict[str, TimerRow]
    snapshot_seq: int
    last_seq: int
    sealed: bool
    counts: Counter[tuple[str, TimerState]] = field(default_factory=Counter)
    dead: Counter[tuple[str, str]] = field(default_factory=Counter)
    pending: SortedList = field(default_factory=SortedList)
    keys: SortedList = field(default_factory=SortedList)
    by_state: dict[TimerState, SortedList] = field(default_factory=dict)
    lateness: dict[str, deque[float]] = field(default_factory=dict)
    duration: dict[str, deque[float]] = field(default_factory=dict)

    def index(self) -> None:
        """Build the counts and the sorted lists from ``timers`` (after a full read)."""
        self.counts = Counter((r.handler, r.state) for r in self.timers.values())
        self.dead = Counter(
            (r.handler, first_line(r.last_error)) for r in self.timers.values() if r.state is DEAD
        )
        self.pending = SortedList(
            (r.due, r.version, r.key) for r in self.timers.values() if r.state is PENDING
        )
        self.keys = SortedList(self.timers)
        self.by_state = {
            s: SortedList(k for k, r in self.timers.items() if r.state is s) for s in INDEXED
        }

    def _forget(self, row: TimerRow) -> None:
        self.counts[(row.handler, row.state)] -= 1
        if row.state in self.by_state:
            self.by_state[row.state].discard(row.key)
        if row.state is PENDING:
            self.pending.discard((row.due, row.version, row.key))
        elif row.state is DEAD:
            self.dead[(row.handler, first_line(row.last_error))] -= 1

    def _remember(self, row: TimerRow) -> None:
        self.counts[(row.handler, row.state)] += 1
        if row.state in self.by_state:
            self.by_state[row.state].add(row.key)
        if row.state is PENDING:
            self.pending.add((row.due, row.version, row.key))
        elif row.state is DEAD:
            self.dead[(row.handler, first_line(row.last_error))] += 1

    def fold(self, seq: int, record: Record) -> None:
        """Apply one tail record with the journal's own rule, keeping every index in step."""
        before = self.timers.get(record.key)
        seen = None
        if before is not None:
            seen = (before.version, before.state, before.due, before.updated_at)
            self._forget(before)
        apply(self.timers, record)
        self.last_seq = seq
        after = self.timers.get(record.key)
        if after is None:  # a stale record of a key compaction dropped: the fold ignored it
            return
        if before is None:
            self.keys.add(record.key)
        self._remember(after)
        if seen is not None and seen[0] == getattr(record, "version", None):
            self._sample(after.handler, seen, record)

    def _sample(self, handler: str, seen: tuple[Any, ...], record: Record) -> None:
        """Lateness at an attempt's start; duration at its end (ack, retry or dead letter)."""
        _version, state, due, updated_at = seen
        if type(record) is Attempt and state is PENDING:
            series, value = self.lateness, record.at - due
        elif type(record) in (Ack, Retry, Dead) and state is RUNNING:
            series, value = self.duration, record.at - updated_at
        else:
            return
        series.setdefault(handler, deque(maxlen=SAMPLES)).append(max(0.0, value))


def _read_all(path: str) -> ViewState:
    """The whole journal, read and checked by the CLI's recovery, then indexed."""
    started = time.perf_counter()
    recovered = as_journaled(recover_sync(path))  # as ``wheel-engine status`` shows it
    con = connect_ro(path)
    try:
        meta = read_meta(con, path)
    except sqlite3.Error as exc:
        raise raise_for(exc, path, "reading") from exc
    finally:
        con.close()
    state = ViewState(
        recovered.timers,
        snapshot_seq=recovered.last_seq - recovered.records,
        last_seq=recovered.last_seq,
        sealed=meta.sealed,
    )
    state.index()
    log.info(
        "read %d timers from %s in %.2fs", len(state.timers), path, time.perf_counter() - started
    )
    return state


def _decode(sealed: bool, seq: int, kind: int, body: bytes) -> Record:
    return codec.open_record(body, seq, kind) if sealed else codec.decode(kind, body, seq=seq)


class JournalView:
    """The live state of the journal at ``path``, refreshed from its tail on each :meth:`read`.

    Thread-safe: :meth:`read` may be called from any worker thread; it returns the current
    :class:`ViewState` with the lock released, so callers must treat it as read-only and may
    see it change under them only through a later :meth:`read`.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._state: ViewState | None = None
        self._rebuilding: threading.Thread | None = None
        self._con: sqlite3.Connection | None = None

    def read(self) -> ViewState:
        """The state, brought up to the journal's last committed record."""
        with self._lock:
            if self._state is None:
                self._state = _read_all(self.path)
            self._catch_up(self._state)
            return self._state

    def close(self) -> None:
        with self._lock:
            if self._con is not None:
                self._con.close()
                self._con = None

    def _connection(self) -> sqlite3.Connection:
        if self._con is None:
            self._con = connect_ro(self.path)
        return self._con

    def _catch_up(self, state: ViewState) -> None:
        con = self._connection()
        try:
            con.execute("BEGIN")
            try:
                snapshot_seq = int(
                    con.execute("SELECT value FROM meta WHERE name = 'snapshot_seq'").fetchone()[0]
                )
                if snapshot_seq > state.last_seq:  # folded away records this view never saw
                    con.execute("COMMIT")
                    self._state = state = _read_all(self.path)
                    return
                if snapshot_seq != state.snapshot_seq:
                    self._rebuild_later(snapshot_seq)
                cur = con.execute(
                    "SELECT seq, kind, body FROM records WHERE seq > ? ORDER BY seq",
                    (state.last_seq,),
                )
                while rows := cur.fetchmany(_BATCH):
                    for seq, kind, body in rows:
                        state.fold(seq, _decode(state.sealed, seq, kind, body))
            finally:
                if con.in_transaction:
                    con.execute("COMMIT")
        except sqlite3.Error as exc:
            self._con = None
            con.close()
            raise raise_for(exc, self.path, "reading the journal's tail") from exc

    def _rebuild_later(self, snapshot_seq: int) -> None:
        """Read the compacted journal afresh in the background; swap it in when done."""
        if self._rebuilding is not None and self._rebuilding.is_alive():
            return

        def rebuild() -> None:
            try:
                fresh = _read_all(self.path)
            except Exception:
                log.warning("rebuilding the view of %s failed; will retry", self.path)
                return
            with self._lock:
                self._state = fresh  # older than the tail, perhaps: the next read catches up

        log.info("journal %s was compacted (snapshot at #%d): re-reading", self.path, snapshot_seq)
        self._rebuilding = threading.Thread(target=rebuild, name="wheel-web-rebuild", daemon=True)
        self._rebuilding.start()
