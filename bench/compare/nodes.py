"""Figure 8: several nodes on one PostgreSQL: schedule and fire throughput with 1, 2 and 3 node
processes, lateness p99, and the failover time after a SIGKILL, beside procrastinate.

Needs a PostgreSQL server: ``WHEEL_ENGINE_BENCH_POSTGRES=postgresql://user@host:port/db`` (any
database the user may connect to; each round creates and drops its own database beside it).
Without it the figure is skipped with one line, so ``make bench-quick`` stays as it was.

Each node is a process of its own (``python -m bench.compare.nodes node URL NAME LEASE``): a
real ``Engine(url, node=..., lease=...)`` with a handler that returns at once. Once every node
holds its share of the partitions, a round runs, per node count:

- **burst**: every node schedules its part of ``nodes_n`` timers (``schedule_many``, batches of
  500, from keys spread over every partition, so most land in other nodes' partitions), all due
  at one moment a little later. *schedule* = timers / the slowest node's scheduling time;
  *fire* = timers / (the last SUCCEEDED - the due moment), read from the database.
- **paced**: ``nodes_paced`` timers spread over ``nodes_spread`` seconds; *lag_p99* = p99 of
  (first attempt - due) on the database's clock.
- **failover** (2 and 3 nodes): timers due over the second after the node holding most
  partitions is SIGKILLed; *failover* = the last of its timers' first attempt - the kill
  (database clock), with ``lease=`` :data:`LEASE`.

procrastinate (``WHEEL_ENGINE_BENCH_PROCRASTINATE=/path/to/python`` with procrastinate and
psycopg installed, or the current interpreter if it has them) runs the same rounds through its
own path: each process defers its jobs (``defer_async`` with ``schedule_at``) and runs a
worker (concurrency 10, ``fetch_job_polling_interval`` 0.1 s instead of its default 5 s: a
job scheduled ahead is only picked up by a poll, so the default would add up to 5 s to each).
Its failover is not measured: a killed worker's jobs stay ``doing`` until a stalled-job sweep
the application must run itself. Not installed: skipped with one line.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Final, NamedTuple
from urllib.parse import urlsplit

from bench.compare.config import Config
from bench.compare.measure import RATE, Comparison, Contender, Figure, Metrics
from journal.state import STATE_CODE, SUCCEEDED

#: Environment: a PostgreSQL server URL (without it the figure is skipped).
URL_ENV: Final = "WHEEL_ENGINE_BENCH_POSTGRES"
#: Environment: a Python interpreter that has procrastinate (the peer runs in its own venv).
PEER_ENV: Final = "WHEEL_ENGINE_BENCH_PROCRASTINATE"
#: Seconds of lease for the nodes: short, so a failover round takes seconds, not a minute.
LEASE: Final = 2.0
#: Seconds a node process may take to start, or to answer one command.
PATIENCE: Final = 60.0
#: Partitions of the journal the engines create (the store's default).
PARTITIONS: Final = 64
NODE_COUNTS: Final = (1, 2, 3)


class Sizes(NamedTuple):
    """How much a round does (kept here, not in ``Config``: the figure runs only with a
    server, and its sizes are its own)."""

    timers: int  #: the burst: scheduled together, all due at one moment
    paced: int  #: timers spread over ``spread`` seconds, for the lateness
    spread: float
    reps: int

    @classmethod
    def of(cls, cfg: Config) -> Sizes:
        return cls(1_000, 500, 1.0, 1) if cfg.quick else cls(10_000, 3_000, 5.0, 1)


FIGURE = Figure("8", RATE, ("schedule", "lag_p99", "failover"))

_SUCCEEDED = STATE_CODE[SUCCEEDED]
_ENGINE_DONE = (
    f"SELECT count(*), max(updated_at) FROM wheel_timers WHERE state = {_SUCCEEDED} AND key LIKE %s"
)
_ENGINE_LAG = (
    "SELECT percentile_cont(0.99) WITHIN GROUP (ORDER BY first_attempt_at - due)"
    " FROM wheel_timers WHERE key LIKE %s"
)
_PEER_DONE = (
    "SELECT count(*), extract(epoch FROM max(e.at)) FROM procrastinate_jobs j"
    " JOIN procrastinate_events e ON e.job_id = j.id AND e.type = 'succeeded'"
    " WHERE j.queue_name = %s"
)
_PEER_LAG = (
    "SELECT percentile_cont(0.99) WITHIN GROUP"
    " (ORDER BY extract(epoch FROM e.at - j.scheduled_at))"
    " FROM procrastinate_jobs j JOIN procrastinate_events e"
    " ON e.job_id = j.id AND e.type = 'started' WHERE j.queue_name = %s"
)


# -- a node process (this module run as a script) ----------------------------------------------


async def _node_main(url: str, name: str, lease: float) -> None:
    from wheel_engine import Engine, Firing

    engine = Engine(url, node=name, lease=lease, horizon=120.0)

    async def noop(firing: Firing) -> None:
        pass

    engine.register("h", noop)
    async with engine:
        await _serve(lambda cmd: _engine_schedule(engine, cmd))


async def _engine_schedule(engine: Any, cmd: dict[str, Any]) -> None:
    keys, dues = _plan(cmd)
    for i in range(0, len(keys), 500):
        await engine.schedule_many(
            [
                {"handler": "h", "key": k, "at": d}
                for k, d in zip(keys[i : i + 500], dues[i : i + 500], strict=True)
            ]
        )


def _plan(cmd: dict[str, Any]) -> tuple[list[str], list[float]]:
    """This node's keys (every n-th of the round's) and their due times."""
    count, nodes, index = cmd["count"], cmd["nodes"], cmd["index"]
    picks = range(index, count, nodes)
    keys = [f"{cmd['prefix']}{i}" for i in picks]
    dues = [cmd["start"] + cmd["spread"] * i / count for i in picks]
    return keys, dues


async def _serve(schedule: Any) -> None:
    """Print ready; then per stdin line (a JSON command) schedule and print the seconds it
    took; return at the end of stdin."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    print(json.dumps({"ready": True}), flush=True)
    while line := await reader.readline():
        t0 = time.perf_counter()
        await schedule(json.loads(line))
        print(json.dumps({"seconds": time.perf_counter() - t0}), flush=True)


#: The peer's node: the same protocol, through procrastinate's own defer and worker. Written to
#: a file and run by the peer's interpreter, which has neither wheel_engine nor this package.
PEER_SCRIPT: Final = """
import asyncio, datetime as dt, json, sys, time
import procrastinate

POLL = 0.1  # seconds; its default 5 s would add up to 5 s to every job scheduled ahead

async def main(url):
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=url))

    @app.task(name="h")
    async def h():
        pass

    async with app.open_async():
        worker = asyncio.create_task(
            app.run_worker_async(concurrency=10, install_signal_handlers=False,
                                 fetch_job_polling_interval=POLL))
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        print(json.dumps({"ready": True}), flush=True)
        while line := await reader.readline():
            cmd = json.loads(line)
            t0 = time.perf_counter()
            picks = range(cmd["index"], cmd["count"], cmd["nodes"])
            dues = [dt.datetime.fromtimestamp(cmd["start"] + cmd["spread"] * i / cmd["count"],
                    dt.timezone.utc) for i in picks]
            for i in range(0, len(dues), 500):  # each job its own due time: one defer each
                await asyncio.gather(*[
                    h.configure(queue=cmd["prefix"], schedule_at=at).defer_async()
                    for at in dues[i:i + 500]])
            print(json.dumps({"seconds": time.perf_counter() - t0}), flush=True)
        worker.cancel()

if sys.argv[1] == "schema":
    app = procrastinate.App(connector=procrastinate.SyncPsycopgConnector(conninfo=sys.argv[2]))
    with app.open():
        app.schema_manager.apply_schema()
else:
    asyncio.run(main(sys.argv[2]))
"""


# -- the parent: databases, processes, rounds ---------------------------------------------------


class _Cluster:
    """``n`` node processes of one contender on a fresh database."""

    def __init__(self, argv: list[list[str]], env: dict[str, str]) -> None:
        self.procs = [
            subprocess.Popen(a, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True)
            for a in argv
        ]
        for proc in self.procs:
            self._reply(proc)

    @staticmethod
    def _reply(proc: subprocess.Popen[str]) -> dict[str, Any]:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"a node process exited ({proc.wait()})")
        return dict(json.loads(line))

    def schedule(self, count: int, start: float, spread: float, prefix: str) -> float:
        """Every live node schedules its share at once; the slowest one's seconds."""
        live = [p for p in self.procs if p.poll() is None]
        for index, proc in enumerate(live):
            cmd = {"count": count, "nodes": len(live), "index": index, "prefix": prefix}
            assert proc.stdin is not None
            proc.stdin.write(json.dumps(cmd | {"start": start, "spread": spread}) + "\n")
            proc.stdin.flush()
        return max(float(self._reply(proc)["seconds"]) for proc in live)

    def close(self) -> None:
        for proc in self.procs:
            if proc.stdin is not None and proc.poll() is None:
                proc.stdin.close()
        for proc in self.procs:
            try:
                proc.wait(timeout=PATIENCE)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _sql(url: str, statement: str, params: Any = None) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(statement, params)
        return cur.fetchall() if cur.description is not None else []


def _db_now(url: str) -> float:
    return float(_sql(url, "SELECT extract(epoch FROM now())::float8")[0][0])


def _fresh_database(server: str, name: str) -> str:
    """A new, empty database ``name`` on ``server``'s server; its URL."""
    _drop(server, name)
    _sql(server, f"CREATE DATABASE {name}")
    return urlsplit(server)._replace(path=f"/{name}").geturl()


def _drop(server: str, name: str) -> None:
    _sql(server, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _wait(what: str, check: Any, timeout: float = PATIENCE) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _owners(url: str) -> dict[int, str]:
    query = (
        "SELECT partition, owner FROM wheel_partitions"
        " WHERE owner IS NOT NULL AND lease_until > extract(epoch FROM now())"
    )
    return dict(_sql(url, query))


def _shared(url: str, n: int) -> bool:
    owners = list(_owners(url).values())
    counts = {name: owners.count(name) for name in set(owners)}
    fair_share = -(-PARTITIONS // n)
    return len(owners) == PARTITIONS and len(counts) == n and max(counts.values()) <= fair_share


class _Side:
    """One contender: how its nodes start, and how its progress is read."""

    def __init__(self, name: str, python: str, script: list[str], done: str, lag: str) -> None:
        self.name, self.python, self.script, self.done_sql, self.lag_sql = (
            name,
            python,
            script,
            done,
            lag,
        )

    def start(self, url: str, n: int) -> _Cluster:
        root = str(Path(__file__).resolve().parents[2])
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]),
        }
        argv = [[self.python, *self.script, url, f"n{i}", str(LEASE)] for i in range(n)]
        return _Cluster(argv, env)

    def pattern(self, prefix: str) -> str:
        return f"{prefix}%" if self.name == ENGINE else prefix

    def finished(self, url: str, prefix: str) -> tuple[int, float | None]:
        count, last = _sql(url, self.done_sql, (self.pattern(prefix),))[0]
        return int(count), None if last is None else float(last)

    def wait_done(self, url: str, prefix: str, count: int) -> float:
        _wait(f"{count} {prefix} timers to fire", lambda: self.finished(url, prefix)[0] >= count)
        last = self.finished(url, prefix)[1]
        assert last is not None
        return last

    def lag_p99(self, url: str, prefix: str) -> float:
        return float(_sql(url, self.lag_sql, (self.pattern(prefix),))[0][0])


ENGINE = "wheel-engine"
PEER = "procrastinate"


def _round(cfg: Config, side: _Side, server: str, n: int) -> Metrics:
    database = f"wheel_bench_nodes_{side.name.replace('-', '_')}_{n}"
    url = _fresh_database(server, database)
    sizes = Sizes.of(cfg)
    if side.name == PEER:
        subprocess.run([side.python, side.script[0], "schema", url], check=True)
    cluster = side.start(url, n)
    try:
        if side.name == ENGINE:
            _wait(f"{n} nodes to share the partitions", lambda: _shared(url, n))
        count = sizes.timers
        start = _db_now(url) + 1.0 + count / 20_000  # time to schedule them all first
        took = cluster.schedule(count, start, 0.0, "burst")
        last = side.wait_done(url, "burst", count)
        m: Metrics = {"schedule": count / took, "rate": count / max(last - start, 1e-3), "n": n}
        paced = sizes.paced
        cluster.schedule(paced, _db_now(url) + 1.0, sizes.spread, "paced")
        side.wait_done(url, "paced", paced)
        m["lag_p99"] = side.lag_p99(url, "paced")
        if side.name == ENGINE and n > 1:
            m["failover"] = _failover(url, cluster)
        return m
    finally:
        cluster.close()
        _drop(server, database)


def _failover(url: str, cluster: _Cluster) -> float:
    """SIGKILL the node holding most partitions; seconds from the kill until the last of its
    timers due just after it first ran elsewhere (database clock)."""
    owners = _owners(url)
    victim = max(set(owners.values()), key=list(owners.values()).count)
    doomed = sorted(p for p, o in owners.items() if o == victim)
    proc = cluster.procs[int(victim[1:])]
    kill_at = _db_now(url)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    cluster.schedule(400, kill_at + 0.2, 1.0, "failover")
    from journal.postgres import partition_of

    keys = [
        f"failover{i}" for i in range(400) if partition_of(f"failover{i}", PARTITIONS) in doomed
    ]
    _wait(
        "the killed node's timers",
        lambda: (
            _sql(
                url,
                f"SELECT count(*) FROM wheel_timers WHERE state = {_SUCCEEDED} AND key = ANY(%s)",
                (keys,),
            )[0][0]
            == len(keys)
        ),
    )
    (last,) = _sql(
        url, "SELECT max(first_attempt_at) FROM wheel_timers WHERE key = ANY(%s)", (keys,)
    )[0]
    return float(last) - kill_at


def _peer_python() -> str | None:
    """The interpreter with procrastinate, or None."""
    candidate = os.environ.get(PEER_ENV) or sys.executable
    probe = subprocess.run(
        [candidate, "-c", "import procrastinate, psycopg"], capture_output=True, check=False
    )
    return candidate if probe.returncode == 0 else None


def run(cfg: Config, series: dict[str, Any]) -> list[Comparison]:
    server = os.environ.get(URL_ENV)
    if not server:
        cfg.log(f"nodes: skipped: set {URL_ENV} to a PostgreSQL server URL to run figure 8")
        return []
    engine = _Side(
        ENGINE, sys.executable, ["-m", "bench.compare.nodes", "node"], _ENGINE_DONE, _ENGINE_LAG
    )
    peer_python = _peer_python()
    script = cfg.scratch / "procrastinate_node.py"
    script.write_text(PEER_SCRIPT)
    peer = _Side(PEER, peer_python or "", [str(script), "node"], _PEER_DONE, _PEER_LAG)
    skip = None if peer_python else f"procrastinate not installed (set {PEER_ENV} to its python)"
    sizes = Sizes.of(cfg)
    comps = []
    for n in NODE_COUNTS:
        contenders = [
            Contender(f"{ENGINE}, {n} node(s)", lambda n=n: _round(cfg, engine, server, n)),  # type: ignore[misc]
            Contender(
                f"{PEER}, {n} worker(s)",
                lambda n=n: _round(cfg, peer, server, n),  # type: ignore[misc]
                skip=skip,
            ),
        ]
        anchor = contenders[1].name if skip is None else contenders[0].name
        comps.append(
            FIGURE.compare(
                cfg,
                key=f"nodes.{n}",
                title=f"{n} node process(es) on one PostgreSQL: fire rate (schedule rate, lag p99)",
                contenders=contenders,
                anchor=anchor,
                reps=sizes.reps,
                params={"nodes": n, "timers": sizes.timers, "paced": sizes.paced, "lease": LEASE},
            )
        )
    return comps


if __name__ == "__main__" and sys.argv[1:2] == ["node"]:
    asyncio.run(_node_main(sys.argv[2], sys.argv[3], float(sys.argv[4])))
