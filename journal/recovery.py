"""Recovery: the live state = the snapshot's rows + every later record, folded in seq order.

Runs synchronously on its own read-only ``sqlite3`` connection (the journal calls it in a worker
thread), inside one read transaction so the snapshot and the tail agree even while an engine
commits or compacts. Rows are fetched in small batches (:data:`BATCH`); each record is decoded,
shape-checked and folded by the rules of :func:`journal.state.apply`, inlined in
:func:`fold_records` (property tests hold the two equal). The first damaged record stops
recovery with :class:`~journal.errors.JournalCorrupt` naming its seq: nothing is skipped.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

import msgpack

from journal import codec
from journal.errors import JournalCorrupt
from journal.records import Kind
from journal.schema import connect_ro, raise_for, read_meta
from journal.state import CANCELED, DEAD, PENDING, RUNNING, STATES, SUCCEEDED, TimerRow

_SCHEDULE: Final = int(Kind.SCHEDULE)
_CANCEL: Final = int(Kind.CANCEL)
_ATTEMPT: Final = int(Kind.ATTEMPT)
_ACK: Final = int(Kind.ACK)
_RETRY: Final = int(Kind.RETRY)
_DEAD: Final = int(Kind.DEAD)
_REDRIVE: Final = int(Kind.REDRIVE)
_KINDS: Final = (_SCHEDULE, _CANCEL, _ATTEMPT, _ACK, _RETRY, _DEAD, _REDRIVE)
_NUM: Final = (float, int)
_OPT_NUM: Final = (float, int, type(None))
_OPT_STR: Final = (str, type(None))
_OPT_BYTES: Final = (bytes, type(None))


class _Bad(Exception):
    """A record failed a shape check in the hot loop (re-diagnosed by ``codec.decode``)."""


__all__ = [
    "BATCH",
    "PROGRESS_EVERY",
    "Progress",
    "Recovered",
    "fold_records",
    "fold_snapshot",
    "recover_sync",
]

#: Rows fetched per ``fetchmany``. Small on purpose: a big batch of row tuples lives long
#: enough to be promoted to the GC's old generation and triggers full collections that scan
#: every TimerRow folded so far (measured: 50k-row batches spend ~3x more time in the GC).
BATCH: Final = 1_000
#: ``progress`` is called about every this many rows.
PROGRESS_EVERY: Final = 50_000

Progress = Callable[[int, int], None]


@dataclass(slots=True)
class Recovered:
    """What recovery found."""

    timers: dict[str, TimerRow]
    #: The highest version ever issued: the next schedule must use a higher one.
    max_version: int
    #: Records replayed from the tail (the records after the snapshot).
    records: int
    #: Rows read from the snapshot.
    snapshot_rows: int = 0
    #: The highest seq folded in (the journal's last committed record).
    last_seq: int = 0
    #: RUNNING rows turned back into PENDING (their attempt was interrupted).
    interrupted: list[str] = field(default_factory=list)


def fold_records(
    timers: dict[str, TimerRow],
    rows: list[tuple[int, int, bytes]],
    max_version: int,
) -> int:
    """Decode and fold ``(seq, kind, body)`` rows in order. Returns the new max version.

    Equivalent to ``apply(timers, codec.decode(kind, body, seq=seq))`` for each row (a property
    test holds it to that), but works on the decoded tuples directly: recovery's hot loop.
    Raises :class:`~journal.errors.JournalCorrupt` naming the first damaged record's seq.
    """
    unpackb = msgpack.unpackb
    get = timers.get
    num = _NUM
    handlers: dict[str, str] = {}  # one str object per handler name, not one per timer
    # Locals, not globals, in the hot loop.
    schedule_, cancel_, attempt_, ack_, retry_, dead_, redrive_ = _KINDS
    pending, running, succeeded, canceled, dead = PENDING, RUNNING, SUCCEEDED, CANCELED, DEAD
    new_row = TimerRow
    bad = _Bad
    seq = 0
    try:
        for seq, kind, body in rows:  # noqa: B007 (seq names a damaged record below)
            f = unpackb(body, raw=False, use_list=False, strict_map_key=True)
            # Shape checks, inline: a damaged body must never become a wrong timer.
            key = f[0]
            version = f[1]
            if type(f) is not tuple or type(key) is not str or type(version) is not int:
                raise bad
            if version > max_version:
                max_version = version
            if kind == attempt_:
                if len(f) != 4 or type(f[2]) is not int or type(f[3]) not in num:
                    raise bad
                row = get(key)
                if row is not None and row.version == version:
                    row.state = running
                    attempt = row.attempts = f[2]
                    if attempt == 1:
                        row.first_attempt_at = f[3]
                    row.updated_at = f[3]
            elif kind == ack_:
                if len(f) != 3 or type(f[2]) not in num:
                    raise bad
                row = get(key)
                if row is not None and row.version == version:
                    row.state = succeeded
                    row.updated_at = f[2]
            elif kind == schedule_:
                payload = f[4]
                if (
                    len(f) != 6
                    or type(f[2]) is not str
                    or type(f[3]) not in num
                    or (payload is not None and type(payload) is not bytes)
                    or type(f[5]) not in num
                ):
                    raise bad
                row = get(key)
                if row is None or row.version <= version:
                    handler = handlers.setdefault(f[2], f[2])
                    timers[key] = new_row(
                        key, version, handler, f[3], payload, pending, 0, None, None, f[5]
                    )
            elif kind == retry_:
                if (
                    len(f) != 6
                    or type(f[2]) is not int
                    or type(f[3]) is not str
                    or type(f[4]) not in num
                    or type(f[5]) not in num
                ):
                    raise bad
                row = get(key)
                if row is not None and row.version == version:
                    row.state = pending
                    row.attempts = f[2]
                    row.last_error = f[3]
                    row.due = f[4]
                    row.updated_at = f[5]
            elif kind == cancel_:
                if len(f) != 3 or type(f[2]) not in num:
                    raise bad
                row = get(key)
                if row is not None and row.version == version:
                    row.state = canceled
                    row.updated_at = f[2]
            elif kind == dead_:
                if (
                    len(f) != 5
                    or type(f[2]) is not int
                    or type(f[3]) is not str
                    or type(f[4]) not in num
                ):
                    raise bad
                row = get(key)
                if row is not None and row.version == version:
                    row.state = dead
                    row.attempts = f[2]
                    row.last_error = f[3]
                    row.updated_at = f[4]
            elif kind == redrive_:
                new_version = f[2]
                if (
                    len(f) != 5
                    or type(new_version) is not int
                    or type(f[3]) not in num
                    or type(f[4]) not in num
                ):
                    raise bad
                if new_version > max_version:
                    max_version = new_version
                row = get(key)
                if row is not None and row.version == version:
                    row.version = new_version
                    row.state = pending
                    row.due = f[3]
                    row.attempts = 0
                    row.first_attempt_at = None
                    row.updated_at = f[4]
            else:
                raise bad
    except Exception as exc:
        # Let the reference decoder say what is wrong with this record; it raises.
        codec.decode(kind, body, seq=seq)
        raise JournalCorrupt(f"record {seq}: damaged ({exc!r})", seq=seq) from exc
    return max_version


def fold_snapshot(
    timers: dict[str, TimerRow],
    rows: list[tuple[str, int, float, bytes]],
    max_version: int,
) -> int:
    """Decode ``(key, state, updated_at, body)`` snapshot rows into ``timers``.

    The same checks as :func:`journal.codec.decode_row`, inlined. Returns the new max version;
    raises :class:`~journal.errors.JournalCorrupt` naming the first damaged row's key.
    """
    unpackb = msgpack.unpackb
    num = _NUM
    opt_num = _OPT_NUM
    opt_str = _OPT_STR
    opt_bytes = _OPT_BYTES
    states = STATES
    n_states = len(STATES)
    new_row = TimerRow
    handlers: dict[str, str] = {}
    bad = _Bad
    try:
        for key, state, updated_at, body in rows:
            f = unpackb(body, raw=False, use_list=False, strict_map_key=True)
            if (
                type(f) is not tuple
                or len(f) != 7
                or type(key) is not str
                or type(state) is not int
                or not 0 <= state < n_states
                or type(updated_at) not in num
                or type(f[0]) is not int
                or type(f[1]) is not str
                or type(f[2]) not in num
                or type(f[3]) not in opt_bytes
                or type(f[4]) is not int
                or type(f[5]) not in opt_str
                or type(f[6]) not in opt_num
            ):
                raise bad
            version = f[0]
            if version > max_version:
                max_version = version
            handler = handlers.setdefault(f[1], f[1])
            timers[key] = new_row(
                key, version, handler, f[2], f[3], states[state], f[4], f[5], f[6], updated_at
            )
    except Exception as exc:
        codec.decode_row(key, state, updated_at, body)  # raises with the reason
        raise JournalCorrupt(f"snapshot row {key!r}: damaged ({exc!r})") from exc
    return max_version


def _read_snapshot(
    con: sqlite3.Connection,
    timers: dict[str, TimerRow],
    max_version: int,
    tick: Callable[[int], None],
) -> tuple[int, int]:
    n = 0
    cur = con.execute("SELECT key, state, updated_at, body FROM snapshot")
    while rows := cur.fetchmany(BATCH):
        max_version = fold_snapshot(timers, rows, max_version)
        n += len(rows)
        tick(len(rows))
    return n, max_version


def recover_sync(path: str, progress: Progress | None = None) -> Recovered:
    """Rebuild the live state of the journal at ``path`` (read-only; no lock needed)."""
    con = connect_ro(path)
    try:
        try:
            con.execute("BEGIN")
            meta = read_meta(con, path)
            (snap_count,) = con.execute("SELECT count(*) FROM snapshot").fetchone()
            total = int(snap_count) + meta.tail_records
            done = 0

            reported = 0

            def tick(n: int) -> None:
                nonlocal done, reported
                done += n
                if progress is not None and (done - reported >= PROGRESS_EVERY or done == total):
                    reported = done
                    progress(done, total)

            timers: dict[str, TimerRow] = {}
            snapshot_rows, max_version = _read_snapshot(con, timers, meta.max_version, tick)
            records = 0
            last_seq = meta.snapshot_seq
            cur = con.execute(
                "SELECT seq, kind, body FROM records WHERE seq > ? ORDER BY seq",
                (meta.snapshot_seq,),
            )
            while rows := cur.fetchmany(BATCH):
                max_version = fold_records(timers, rows, max_version)
                records += len(rows)
                last_seq = rows[-1][0]
                tick(len(rows))
            con.execute("COMMIT")
        except sqlite3.Error as exc:
            raise raise_for(exc, path, "recovering") from exc
    finally:
        con.close()
    if progress is not None and total == 0:
        progress(0, 0)
    interrupted = []
    for row in timers.values():
        if row.state == RUNNING:
            row.state = PENDING
            interrupted.append(row.key)
    return Recovered(
        timers=timers,
        max_version=max_version,
        records=records,
        snapshot_rows=snapshot_rows,
        last_seq=last_seq,
        interrupted=interrupted,
    )
