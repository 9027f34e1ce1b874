"""Figure 10, its PostgreSQL half (``--only mass_expiry_pg``; ``--only 10`` runs both halves):
a mass expiry across three node processes, handler A limited with ``limit_scope="cluster"``
(issue 26), beside handler B's timer due every 10 ms.

Needs a PostgreSQL server, as figure 8 does: ``WHEEL_ENGINE_BENCH_POSTGRES`` (each run creates
and drops a database of its own beside the one named); without it the half is skipped with one
line. Each node is a process of its own (``python -m bench.compare.mass_expiry_pg node URL NAME
RATE SCOPE``): a real ``Engine(url, node=...)`` with ``a`` (``rate=``, ``limit_scope=SCOPE``) and
``b``, both returning at once. Two contenders: A limited with ``limit_scope="cluster"`` (the
anchor), and with ``limit_scope="node"`` at a third of the rate on each node (the same combined
rate without the database's row: B's lateness beside it is what the cluster scope costs B).
Once the three hold their shares of the partitions, the driver schedules (through the CLI's
client, the engines' own statements) :attr:`Sizes.timers` timers of A due within one second and
B's timers every :data:`B_EVERY` seconds around them, and waits for every one to succeed.

Everything is read from the database afterwards, on its clock (``first_attempt_at``, the claim's
time): *rate_error*, the largest relative gap between A's starts in a whole second after the
first (to its last whole one) and the rate, or by how much the first second's starts exceed
``burst + rate``, which issue 26 wants within 10% in every window;
*p99*, B's lateness (first attempt - due) over the B timers due while A's backlog is worked off;
*a_seconds* from A's due second to its last start, *a_x_ideal* that over ``N / rate``, and
*peak_rate*, A's most starts in one second (at most ``burst + rate`` in the first).
"""

from __future__ import annotations

import asyncio
import math
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, NamedTuple, cast

from bench.compare.mass_expiry import B_EVERY  # the SQLite half's B, every 10 ms
from bench.compare.measure import Comparison, Contender, Figure, Measure, Metrics
from bench.compare.nodes import (
    LEASE,
    URL_ENV,
    _db_now,
    _drop,
    _fresh_database,
    _shared,
    _sql,
    _wait,
)

if TYPE_CHECKING:
    from bench.compare.config import Config
    from bench.compare.targets import Target

#: Seconds before A's due second (beyond the scheduling's), and of B before and after A.
LEAD: Final = 2.0
#: Timers/s the driver's scheduling is assumed to reach at least.
SCHEDULE_FLOOR: Final = 10_000
NODES: Final = 3
#: Issue 26's goal: the combined rate within 10% of the limit in every whole second.
RATE_ERROR_GOAL: Final = 0.10
NAME = "3 nodes, limit_scope='cluster'"
#: The same run with each node limiting its own starts to a third of the rate: what B's lateness
#: is without the database's row (the cluster scope's cost beside it).
NODE_NAME = "3 nodes, limit_scope='node', rate/3 each"
FIGURE = Figure(
    "10",
    Measure("rate_error", "fraction", higher_is_better=False),
    ("p99", "a_seconds", "peak_rate"),
)


class Sizes(NamedTuple):
    timers: int
    rate: float

    @property
    def burst(self) -> int:
        """A's burst: the default, ``max(1, rate)`` tokens."""
        return max(1, math.floor(self.rate))

    @classmethod
    def of(cls, cfg: Config) -> Sizes:
        return cls(6_000, 1_000.0) if cfg.quick else cls(60_000, 4_000.0)


# -- a node process ----------------------------------------------------------------------------


async def _node(url: str, name: str, rate: float, scope: Literal["cluster", "node"]) -> None:
    from wheel_engine import Engine, Firing

    engine = Engine(url, node=name, lease=LEASE, horizon=120.0)

    def noop(firing: Firing) -> None:
        pass

    engine.register("a", noop, rate=rate, limit_scope=scope)
    engine.register("b", noop)
    async with engine:
        print('{"ready": true}', flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)  # until closed


# -- the driver ---------------------------------------------------------------------------------


def _schedule(url: str, requests: list[tuple[str, str, float]]) -> None:
    from journal.postgres import PostgresClient

    with PostgresClient.connect(url) as client:
        for first in range(0, len(requests), 1_000):
            batch = requests[first : first + 1_000]
            client.schedule_many([client.request(k, h, due) for k, h, due in batch])


def _side(server: str, sizes: Sizes, scope: Literal["cluster", "node"]) -> Metrics:
    url = _fresh_database(server, "wheel_bench_mass_expiry_pg")
    # Node scope: each node limits its own starts to its share, the same rate in all.
    node_rate = sizes.rate if scope == "cluster" else sizes.rate / NODES
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    argv = [sys.executable, "-m", "bench.compare.mass_expiry_pg", "node", url]
    procs = [
        subprocess.Popen(
            [*argv, f"n{i}", repr(node_rate), scope],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for i in range(NODES)
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None and proc.stdout.readline().strip(), "a node failed"
        _wait(f"{NODES} nodes to share the partitions", lambda: _shared(url, NODES))
        t0 = math.ceil(_db_now(url) + LEAD + sizes.timers / SCHEDULE_FLOOR)
        window = sizes.timers / sizes.rate
        b = [
            (f"b{i}", "b", t0 - LEAD + i * B_EVERY)
            for i in range(int((window + 2 * LEAD) / B_EVERY))
        ]
        a = [(f"a{i}", "a", t0 + i / sizes.timers) for i in range(sizes.timers)]
        _schedule(url, b + a)
        total = len(a) + len(b)
        done = "SELECT count(*) FROM wheel_timers WHERE state = 2"
        _wait("every timer to succeed", lambda: _sql(url, done)[0][0] >= total, 60 + 3 * window)
        rows = _sql(url, "SELECT handler, due, first_attempt_at FROM wheel_timers")
    finally:
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.close()
        for proc in procs:
            proc.wait(timeout=60)
        _drop(server, "wheel_bench_mass_expiry_pg")
    starts = sorted(first for handler, _, first in rows if handler == "a")
    late = sorted(
        first - due for handler, due, first in rows if handler == "b" and t0 <= due < t0 + window
    )
    per_second = Counter(math.floor(start - t0) for start in starts)
    # The first second may hold the burst too (at most burst + rate); the last is cut short.
    first = max(0.0, per_second[0] / (sizes.rate + sizes.burst) - 1.0)
    steady = range(1, math.floor(starts[-1] - t0))
    errors = [first, *(abs(per_second[k] - sizes.rate) / sizes.rate for k in steady)]
    a_seconds = starts[-1] - t0
    return {
        "rate_error": max(errors),
        "p99": late[min(len(late) - 1, math.ceil(0.99 * len(late)) - 1)],
        "a_seconds": a_seconds,
        "a_x_ideal": a_seconds / window,
        "peak_rate": max(per_second.values()),
        "per_second": [per_second[k] for k in range(math.floor(a_seconds) + 1)],
    }


def run(cfg: Config, series: dict[str, Any]) -> list[Comparison]:
    """The PostgreSQL half of figure 10 (skipped with one line without a server)."""
    server = os.environ.get(URL_ENV)
    if not server:
        cfg.log(f"mass_expiry: PostgreSQL half skipped: set {URL_ENV} to a server URL")
        return []
    sizes = Sizes.of(cfg)
    note = f"A: {sizes.timers:,} timers due in one second, rate={sizes.rate:g}"
    contenders = [
        Contender(NAME, lambda: _side(server, sizes, "cluster"), note=f"{note} cluster-wide"),
        Contender(NODE_NAME, lambda: _side(server, sizes, "node"), note=f"{note} in all"),
    ]
    comparison = FIGURE.compare(
        cfg,
        key="mass_expiry_pg",
        title=(
            f"mass expiry on PostgreSQL, {NODES} nodes: {sizes.timers:,} timers of a handler with"
            f" rate={sizes.rate:g}, limit_scope='cluster', due in one second (the combined"
            " rate's largest gap to the limit in a whole second)"
        ),
        contenders=contenders,
        anchor=NAME,
        reps=1,
        params={"a_timers": sizes.timers, "a_rate": sizes.rate, "nodes": NODES},
    )
    return [comparison]


def targets(cfg: Config) -> list[Target]:
    from bench.compare.targets import Target

    return [
        Target(
            "mass expiry on PostgreSQL: the combined rate within 10% of the limit every second",
            "mass_expiry_pg",
            NAME,
            RATE_ERROR_GOAL,
            kind="max",
            metric="rate_error",
        )
    ]


if __name__ == "__main__":  # pragma: no cover
    if sys.argv[1] == "node":
        scope = cast(Literal["cluster", "node"], sys.argv[5])
    asyncio.run(_node(sys.argv[2], sys.argv[3], float(sys.argv[4]), scope))
