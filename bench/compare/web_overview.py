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


def _status_like(path: Path) -> Counter[tuple[str, str]]:
    """What ``wheel-engine status`` computes per run: everything recovered, then counted."""
    recovered = recover_sync(str(path))
    return Counter((r.handler, str(r.state)) for r in recovered.timers.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.compare.web_overview")
    parser.add_argument("--timers", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--tail", type=int, default=100, help="records appended between reads")
    args = parser.parse_args(argv)

    with warnings.catch_warnings():  # its TestClient says it prefers another HTTP client
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient

    from wheel_engine import web

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
            timings: dict[str, list[float]] = {"/api/overview": [], "/": []}
            for r in range(args.rounds):
                for url, series in timings.items():
                    asyncio.run(_append(path, args.tail, (r * 2 + (url == "/")) * args.tail))
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
        verdict = "met" if median < BAR_SECONDS else "MISSED"
        print(
            f"GET {url}: median {median * 1000:.1f} ms, max {max(series) * 1000:.1f} ms over "
            f"{args.rounds} requests, {args.tail} new records before each "
            f"(bar {BAR_SECONDS * 1000:.0f} ms: {verdict})"
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
