"""The web console's overview on a big journal: ``python -m bench.compare.web_overview``.

Writes a journal of ``--timers`` timers (default 1,000,000: 90% PENDING over the next two days,
5% SUCCEEDED, 4% DEAD with one of a few errors, 1% CANCELED) through the journal's own writer,
compacts it (so the timers are snapshot rows, as in a journal an engine has run on for a while),
then serves :func:`wheel_engine.web.app` on it and times ``GET /api/overview`` and ``GET /``
through the ASGI stack, each after ``--tail`` new records were appended (what an engine writes
between two refreshes). The peer in the same run: the same counts computed the way
``wheel-engine status`` does, by recovering the whole journal for the request.

Prints one line per measure (median of ``--rounds``), and the console's start-up (its one full
read). Not part of ``wheel-engine bench``: it is a bar for the console (200 ms for the
overview), not a comparison with the other libraries.

``--postgres URL`` (an empty database) measures the same overview on a PostgreSQL journal: the
schema made by an engine, the rows inserted by one ``INSERT ... SELECT generate_series`` with
the same mix of states, and the database answering every request (no peer: there the console
is the peer, asking the database as ``wheel-engine status`` does).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import warnings
from collections import Counter
from pathlib import Path

from journal import Ack, Attempt, Cancel, Dead, Journal, Record, Schedule
from journal.recovery import recover_sync

with warnings.catch_warnings():  # its TestClient says it prefers another HTTP client
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

BAR_SECONDS = 0.200
_BATCH = 20_000
_ERRORS = ("TimeoutError: upstream took too long", "PermanentError: card declined", "KeyError: 'x'")


def _records(n: int, now: float) -> list[Record]:
    out: list[Record] = []
    for i in range(n):
        key, version, slot = f"order-{i:07d}", i + 1, i % 100
        due = now + 60.0 + (i * 172_800.0 / n)
        out.append(
            Schedule(key, version, "orders.expire" if i % 3 else "mail.send", due, None, now)
        )
        if slot < 5:
            out += [Attempt(key, version, 1, now), Ack(key, version, now)]
        elif slot < 9:
            out += [Attempt(key, version, 1, now), Dead(key, version, 1, _ERRORS[i % 3], now)]
        elif slot < 10:
            out.append(Cancel(key, version, now))
    return out


async def _write(path: Path, n: int) -> None:
    now = time.time()
    journal = await Journal.open(path, durability="normal")
    try:
        records = _records(n, now)
        for start in range(0, len(records), _BATCH):
            await journal.submit(records[start : start + _BATCH])
        await journal.compact(retention=1e9, now=now)
    finally:
        await journal.close()


async def _append(path: Path, n: int, base: int) -> None:
    journal = await Journal.open(path, durability="normal")
    try:
        now = time.time()
        await journal.submit(
            [
                Schedule(f"tail-{base + i}", 10**9 + base + i, "h", now + 30, None, now)
                for i in range(n)
            ]
        )
    finally:
        await journal.close()


def _postgres(url: str, n: int, rounds: int) -> None:
    import psycopg

    from wheel_engine import Engine, web

    async def schema() -> None:
        async with Engine(url, node="bench"):
            pass

    asyncio.run(schema())
    now = time.time()
    with psycopg.connect(url, autocommit=True) as conn:
        t0 = time.perf_counter()
        conn.execute(
            "INSERT INTO wheel_timers (key, partition, version, handler, due, state, last_error)"
            " SELECT 'order-' || lpad(i::text, 7, '0'), i %% 64, i + 1,"
            "  CASE WHEN i %% 3 = 0 THEN 'mail.send' ELSE 'orders.expire' END,"
            "  %(now)s + 60 + i * 172800.0 / %(n)s,"
            "  CASE WHEN i %% 100 < 5 THEN 2 WHEN i %% 100 < 9 THEN 4"
            "   WHEN i %% 100 < 10 THEN 3 ELSE 0 END,"
            "  CASE WHEN i %% 100 BETWEEN 5 AND 8 THEN 'PermanentError: card declined' END"
            " FROM generate_series(0, %(n)s - 1) AS i",
            {"now": now, "n": n},
        )
        conn.execute("ANALYZE wheel_timers")
        print(f"postgres: {n} rows inserted in {time.perf_counter() - t0:.1f}s")
    with TestClient(web.app(url)) as client:
        t0 = time.perf_counter()
        assert client.get("/api/overview").status_code == 200
        print(f"postgres: the first overview (counted while the request waits): "
              f"{time.perf_counter() - t0:.2f}s")  # fmt: skip
        series = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            assert client.get("/api/overview").status_code == 200
            series.append(time.perf_counter() - t0)
    from wheel_engine.web.pg_overview import compute

    with psycopg.connect(url, autocommit=True) as conn:
        recounts = []
        for _ in range(3):
            t0 = time.perf_counter()
            compute(conn)
            recounts.append(time.perf_counter() - t0)
    median = statistics.median(series)
    verdict = "met" if median < BAR_SECONDS else "MISSED"
    print(
        f"postgres GET /api/overview: median {median * 1000:.1f} ms, max {max(series) * 1000:.1f}"
        f" ms over {rounds} requests (bar {BAR_SECONDS * 1000:.0f} ms: {verdict}); the recount"
        f" behind it (at most one per 10 s while watched): {statistics.median(recounts):.2f}s"
    )


def _status_like(path: Path) -> Counter[tuple[str, str]]:
    """What ``wheel-engine status`` computes per run: everything recovered, then counted."""
    recovered = recover_sync(str(path))
    return Counter((r.handler, str(r.state)) for r in recovered.timers.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.compare.web_overview")
    parser.add_argument("--timers", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--tail", type=int, default=100, help="records appended between reads")
    parser.add_argument("--postgres", metavar="URL", help="an empty database: measure there")
    args = parser.parse_args(argv)

    from wheel_engine import web

    if args.postgres:
        _postgres(args.postgres, args.timers, args.rounds)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.db"
        t0 = time.perf_counter()
        asyncio.run(_write(path, args.timers))
        took = time.perf_counter() - t0
        print(f"journal: {args.timers} timers written and compacted in {took:.1f}s")
        with TestClient(web.app(str(path))) as client:
            t0 = time.perf_counter()
            assert client.get("/api/overview").status_code == 200
            print(f"console start-up (one full read): {time.perf_counter() - t0:.2f}s")
            timings: dict[str, list[float]] = {
                "/api/overview": [],
                "/": [],
                "/api/timers?state=DEAD": [],  # the DEAD keys have a list of their own
                "/api/timers?state=PENDING&handler=nobody": [],  # 90% walked, none match
            }
            base = 0
            for _ in range(args.rounds):
                for url, series in timings.items():
                    asyncio.run(_append(path, args.tail, base))
                    base += args.tail
                    t0 = time.perf_counter()
                    response = client.get(url)
                    series.append(time.perf_counter() - t0)
                    assert response.status_code == 200
        peer: list[float] = []
        for _ in range(max(1, args.rounds // 5)):
            t0 = time.perf_counter()
            _status_like(path)
            peer.append(time.perf_counter() - t0)
    for url, series in timings.items():
        median = statistics.median(series)
        bar = url in ("/", "/api/overview")  # the bar is the overview's; the lists are shown
        verdict = ("met" if median < BAR_SECONDS else "MISSED") if bar else "no bar"
        print(
            f"GET {url}: median {median * 1000:.1f} ms, max {max(series) * 1000:.1f} ms over "
            f"{args.rounds} requests, {args.tail} new records before each "
            f"({f'bar {BAR_SECONDS * 1000:.0f} ms: ' if bar else ''}{verdict})"
        )
    peer_median = statistics.median(peer)
    overview = statistics.median(timings["/api/overview"])
    print(
        f"peer, the counts recomputed per request as `wheel-engine status` does: "
        f"median {peer_median:.2f}s ({peer_median / overview:.0f}x the overview)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
