"""Adapters for everything wheel-engine is compared with.

asyncio and uvloop (``loop.call_at``), raw ``sqlite3`` (the ceiling for durable writes),
APScheduler 3 with its SQLAlchemy SQLite job store, and huey's ``SqliteHuey``. Every optional
peer is imported lazily; ``*_missing()`` returns why it cannot run (or None), so a machine
without the ``bench`` extra skips it with a clear line instead of failing.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import importlib.metadata
import importlib.util
import logging
import os
import signal
import sqlite3
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import msgpack

T = TypeVar("T")

INSTALL_HINT = "pip install ./bench (from a checkout of wheel-engine: the peers and plots)"


def _missing(module: str, dist: str | None = None) -> str | None:
    """Why ``module`` cannot be used here, or None. It is looked up, not imported: a peer that
    runs in a child process (:mod:`bench.compare.isolated`) must not join this one's heap."""
    if importlib.util.find_spec(module) is None:
        return f"{dist or module} not installed ({INSTALL_HINT})"
    return None


def uvloop_missing() -> str | None:
    return _missing("uvloop")


def apscheduler_missing() -> str | None:
    why = _missing("apscheduler")
    if why:
        return why
    try:
        major = int(importlib.metadata.version("apscheduler").split(".")[0])
    except (importlib.metadata.PackageNotFoundError, ValueError):
        major = 3
    if major != 3:
        return f"APScheduler {major}.x installed; this adapter targets APScheduler 3"
    return _missing("sqlalchemy")


def huey_missing() -> str | None:
    return _missing("huey")


def run_on(loop_kind: str, main: Callable[[], Awaitable[T]]) -> T:
    """Run ``main()`` on a fresh event loop: ``"asyncio"`` (the default loop) or ``"uvloop"``."""
    if loop_kind == "uvloop":
        import uvloop

        factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    else:
        factory = asyncio.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main())  # type: ignore[arg-type]


class Countdown:
    """Resolves :attr:`done` with ``clock()`` on the ``n``-th call of :attr:`tick`.

    ``tick`` is a closure with an optional argument, so a ``call_at`` callback (no argument)
    and an engine handler (one ``Firing``) call it at the same cost as a hand-written one:
    every contender pays exactly this per firing. :attr:`count` says how far it got.
    """

    __slots__ = ("_count", "done", "tick")

    def __init__(self, n: int, clock: Callable[[], float]) -> None:
        done: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        count = 0

        def tick(_: object = None) -> None:
            nonlocal count
            count += 1
            if count == n:
                done.set_result(clock())

        self.done = done
        self.tick = tick
        self._count: Callable[[], int] = lambda: count

    @property
    def count(self) -> int:
        return self._count()


def remove_db(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal", "-lock"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(f"{path}{suffix}")


@contextlib.contextmanager
def quiet_loggers(*names: str) -> Iterator[None]:
    saved = [(n, logging.getLogger(n).level) for n in names]
    for n in names:
        logging.getLogger(n).setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for n, lvl in saved:
            logging.getLogger(n).setLevel(lvl)


# ---------------------------------------------------------------------------------------------
# raw sqlite3: the ceiling for durable writes, and the floor for recovery

RAW_DDL = (
    "CREATE TABLE IF NOT EXISTS records ("
    "seq INTEGER PRIMARY KEY, kind INTEGER NOT NULL, body BLOB NOT NULL)"
)
SYNC = {"full": "FULL", "normal": "NORMAL"}


def raw_insert(path: Path, n: int, durability: str, batch: int = 1000) -> dict[str, float]:
    """Insert ``n`` schedule-like rows, ``batch`` per transaction, WAL, ``synchronous`` as the
    engine's durability. Each row is what a journal must store for a schedule: a msgpack body
    of (key, version, handler, due, payload, at), encoded inside the timed loop."""
    remove_db(path)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={SYNC[durability]}")
    conn.execute(RAW_DDL)
    packb = msgpack.packb
    now = time.time()
    t0 = time.perf_counter()
    v = 0
    for start in range(0, n, batch):
        rows = []
        at = time.time()
        for i in range(start, min(n, start + batch)):
            v += 1
            rows.append((1, packb((f"k{i}", v, "bench", now + 3600.0 + i * 1e-3, None, at))))
        conn.execute("BEGIN")
        conn.executemany("INSERT INTO records (kind, body) VALUES (?, ?)", rows)
        conn.execute("COMMIT")
    el = time.perf_counter() - t0
    conn.close()
    return {"rate": n / el, "seconds": el, "n": n}


def raw_read_decode(path: Path) -> dict[str, float]:
    """Read every row of every table in the SQLite file at ``path`` and msgpack-decode every
    blob column: the least any recovery has to do. Schema-agnostic, so it reads exactly the
    rows the engine's journal wrote."""
    t0 = time.perf_counter()
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    tables = [
        r[0]
        for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'"
        )
    ]
    unpackb = msgpack.unpackb
    rows = decoded = undecodable = 0
    for table in tables:
        for row in conn.execute(f'SELECT * FROM "{table}"'):
            rows += 1
            for col in row:
                if isinstance(col, bytes):
                    try:
                        unpackb(col)
                        decoded += 1
                    except Exception:
                        undecodable += 1
    conn.close()
    el = time.perf_counter() - t0
    return {"seconds": el, "rows": rows, "decoded": decoded, "undecodable": undecodable}


# ---------------------------------------------------------------------------------------------
# APScheduler 3, SQLAlchemy job store on SQLite

_aps_lock = threading.Lock()
_aps_count = 0
_aps_target = 0
_aps_done = threading.Event()


def _aps_job() -> None:
    """The job APScheduler runs (module level: the SQLAlchemy store pickles a reference)."""
    global _aps_count
    with _aps_lock:
        _aps_count += 1
        if _aps_count >= _aps_target:
            _aps_done.set()


def _aps_scheduler(path: Path) -> Any:
    from apscheduler.executors.pool import ThreadPoolExecutor
    from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
    from apscheduler.schedulers.background import BackgroundScheduler

    return BackgroundScheduler(
        jobstores={"default": SQLAlchemyJobStore(url=f"sqlite:///{path}")},
        executors={"default": ThreadPoolExecutor(10)},
        job_defaults={"misfire_grace_time": None, "coalesce": False},
        timezone=dt.UTC,
    )


APS_NOTE = (
    "BackgroundScheduler + SQLAlchemyJobStore(sqlite:///file, SQLite defaults: rollback "
    "journal, synchronous=FULL), add_job(trigger='date'), one transaction per job"
)


def aps_schedule(path: Path, n: int) -> dict[str, float]:
    remove_db(path)
    with quiet_loggers("apscheduler"):
        sched = _aps_scheduler(path)
        sched.start(paused=True)
        try:
            run_date = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
            t0 = time.perf_counter()
            for i in range(n):
                sched.add_job(_aps_job, trigger="date", run_date=run_date, id=f"k{i}", args=())
            el = time.perf_counter() - t0
        finally:
            sched.shutdown(wait=False)
    return {"rate": n / el, "seconds": el, "n": n}


def aps_fire(path: Path, n: int, timeout: float) -> dict[str, float]:
    """``n`` jobs already due sit in the store; time from ``resume()`` until all ran."""
    global _aps_count, _aps_target
    remove_db(path)
    with quiet_loggers("apscheduler"):
        sched = _aps_scheduler(path)
        sched.start(paused=True)
        try:
            run_date = dt.datetime.now(dt.UTC)
            for i in range(n):
                sched.add_job(_aps_job, trigger="date", run_date=run_date, id=f"k{i}")
            with _aps_lock:
                _aps_count = 0
                _aps_target = n
                _aps_done.clear()
            t0 = time.perf_counter()
            sched.resume()
            if not _aps_done.wait(timeout):
                raise TimeoutError(f"APScheduler ran {_aps_count} of {n} jobs in {timeout}s")
            el = time.perf_counter() - t0
        finally:
            sched.shutdown(wait=True)
    return {"rate": n / el, "seconds": el, "n": n}


# ---------------------------------------------------------------------------------------------
# huey, SqliteHuey

HUEY_NOTE = (
    "SqliteHuey(results=False, WAL); schedule = task.schedule(eta=...) (one insert+commit each); "
    "firing = an in-process consumer with 4 worker threads (huey.create_consumer(...).start())"
)
_huey_lock = threading.Lock()
_huey_count = 0
_huey_target = 0
_huey_done = threading.Event()


def _huey_job() -> None:
    global _huey_count
    with _huey_lock:
        _huey_count += 1
        if _huey_count >= _huey_target:
            _huey_done.set()


def _huey(path: Path, fsync: bool | None) -> tuple[Any, Any]:
    from huey import SqliteHuey

    h = SqliteHuey("bench", filename=str(path), results=False, fsync=fsync)
    task = h.task(name="bench_job")(_huey_job)
    return h, task


def huey_schedule(path: Path, n: int, fsync: bool | None) -> dict[str, float]:
    remove_db(path)
    h, task = _huey(path, fsync)
    eta = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
    t0 = time.perf_counter()
    for _ in range(n):
        task.schedule(eta=eta)
    el = time.perf_counter() - t0
    h.storage.close()
    return {"rate": n / el, "seconds": el, "n": n}


def huey_fire(path: Path, n: int, timeout: float) -> dict[str, float]:
    """``n`` tasks scheduled with an eta already past; time from starting an in-process
    consumer (4 worker threads) until all ran."""
    global _huey_count, _huey_target
    remove_db(path)
    h, task = _huey(path, None)
    eta = dt.datetime.now(dt.UTC) - dt.timedelta(milliseconds=1)
    for _ in range(n):
        task.schedule(eta=eta)
    with _huey_lock:
        _huey_count = 0
        _huey_target = n
        _huey_done.clear()
    sigs = [s for s in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)) if s]
    saved = {s: signal.getsignal(s) for s in sigs}
    with quiet_loggers("huey", "huey.consumer"):
        consumer = h.create_consumer(
            workers=4, worker_type="thread", periodic=False, check_worker_health=False
        )
        t0 = time.perf_counter()
        consumer.start()
        try:
            if not _huey_done.wait(timeout):
                raise TimeoutError(f"huey ran {_huey_count} of {n} tasks in {timeout}s")
            el = time.perf_counter() - t0
        finally:
            consumer.stop(graceful=True)
            for s, handler in saved.items():
                signal.signal(s, handler)
            h.storage.close()
    return {"rate": n / el, "seconds": el, "n": n}
