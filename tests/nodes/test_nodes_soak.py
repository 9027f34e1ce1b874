"""The fault soak (issue 21): engine processes on a PostgreSQL of their own, under load with
retries and cancels, through SIGKILLs, SIGSTOP/SIGCONT past the lease, and server restarts
(``pg_ctl stop -m fast`` and ``-m immediate``).

Nodes a, b and c fire; node s also schedules: a thread asks it every 50 ms for a few timers due
0.2-2.5 s ahead (every third one's handler fails its first attempt) and cancels some of them at
once. ``schedule`` may fail while the server is down (``StoreUnavailable``): only the timers it
committed count. The faults come one after the other, each on a random node of a, b and c (a
killed node is started again under its name); the server restarts hit every node.

Checked across nodes, from their firing logs and the database, once everything has settled:

- no committed timer lost: each committed, uncancelled version ran and ended SUCCEEDED;
- none early: no handler started before its due, no attempt was claimed before it;
- no cancelled version started;
- no version started by two nodes unless a fault interrupted the first: a version that ran
  more often than its handler needs (once; twice for the failing ones) ran again only after
  a fault (kill or pause of the node that ran it before, or a server restart) that began after
  that earlier run started;
- no row left RUNNING without a handler (everything ends SUCCEEDED or CANCELED).

CI runs four faults (one of each kind); ``WHEEL_ENGINE_PG_SOAK=1`` runs
``WHEEL_ENGINE_PG_SOAK_FAULTS`` of them (default 32) and prints the figures.
"""

from __future__ import annotations

import itertools
import os
import random
import signal
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fault_cluster import FaultCluster, fault_cluster, fresh_database
from node_support import sql
from process_support import NodeProcess, firings, shared_by, wait_for

pytestmark = pytest.mark.slow

LONG = os.environ.get("WHEEL_ENGINE_PG_SOAK") == "1"
FAULTS = int(os.environ.get("WHEEL_ENGINE_PG_SOAK_FAULTS", "32")) if LONG else 4
KINDS = ("kill", "pause", "restart-fast", "restart-immediate")
LEASE = 2.0
FIRING = ("a", "b", "c")
CALM = 1.5  #: seconds of normal running between two faults
SETTLE = 60.0  #: seconds allowed, after the last fault, for every timer to finish
UNFINISHED = "SELECT count(*) FROM wheel_timers WHERE state NOT IN (2, 3)"


def flaky(key: str) -> bool:
    """Whether the load gave this key the handler that fails its first attempt. Told by the key,
    not by the reply: a ``schedule_many`` refused while the server restarted mid-COMMIT may
    still have committed (its outcome is unknown), and that timer runs like any other."""
    return key.startswith("L") and int(key[1:]) % 3 == 0


@dataclass
class Load:
    """What the scheduling thread did: versions committed, cancels that returned CANCELED."""

    node: NodeProcess
    committed: dict[str, int] = field(default_factory=dict)
    cancelled: set[str] = field(default_factory=set)
    refused: int = 0  #: schedule or cancel calls that failed (the server was down)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        rng = random.Random(21)
        numbers = itertools.count()
        while not self.stop.is_set():
            requests = []
            for _ in range(4):
                n = next(numbers)
                handler = "flaky" if flaky(f"L{n}") else "h"
                at = time.time() + rng.uniform(0.2, 2.5)
                requests.append({"handler": handler, "key": f"L{n}", "at": at})
            reply = self.node.ask("schedule_many", requests=requests)
            if "error" in reply:
                self.refused += 1
            else:
                for key, version in reply["scheduled"]:
                    self.committed[key] = version
                victim = requests[-1]
                if float(victim["at"]) > time.time() + 1.0 and rng.random() < 0.5:
                    key = str(victim["key"])
                    answer = self.node.ask("cancel", key=key, version=self.committed[key])
                    if answer.get("cancel") == "CANCELED":
                        self.cancelled.add(key)
                    elif "error" in answer:
                        self.refused += 1
            time.sleep(0.05)


@dataclass
class Fault:
    kind: str
    node: str | None  #: None: the server (every node)
    began: float
    ended: float


@pytest.fixture(scope="module")
def cluster() -> Iterator[FaultCluster]:
    with fault_cluster() as own:
        yield own


def test_the_fault_soak(cluster: FaultCluster, tmp_path: Path) -> None:
    url = fresh_database(cluster, "soak")
    rng = random.Random(2100)
    names = [*FIRING, "s"]
    logs = {name: tmp_path / f"{name}.log" for name in names}
    procs = {name: NodeProcess(url, name, LEASE, logs[name]) for name in names}
    every: list[NodeProcess] = list(procs.values())  # every process started, for stopping
    for proc in every:
        proc.ready()
    faults: list[Fault] = []
    load = Load(procs["s"])
    loader = threading.Thread(target=load.run, daemon=True)
    try:
        wait_for("the nodes sharing", lambda: shared_by(url, names))
        loader.start()
        time.sleep(CALM)
        for n in range(FAULTS):
            kind = KINDS[n % len(KINDS)] if n < len(KINDS) else rng.choice(KINDS)
            faults.append(inject(kind, rng, cluster, procs, every, url, logs))
            time.sleep(CALM)
        load.stop.set()
        loader.join(60)
        assert not loader.is_alive(), "the scheduling thread hung"
        wait_for("every timer to finish", lambda: sql(url, UNFINISHED) == [(0,)], SETTLE)
    finally:
        load.stop.set()
        for proc in every:
            if proc.proc.poll() is None:
                proc.proc.send_signal(signal.SIGCONT)
                proc.proc.send_signal(signal.SIGTERM)
        for proc in every:
            proc.proc.wait(30)
    fired = firings([every[i] for i in first_of_each_log(every)])
    check(url, load, faults, fired)


def inject(
    kind: str,
    rng: random.Random,
    cluster: FaultCluster,
    procs: dict[str, NodeProcess],
    every: list[NodeProcess],
    url: str,
    logs: dict[str, Path],
) -> Fault:
    began = time.time()
    if kind.startswith("restart"):
        cluster.outage(rng.uniform(1.0, LEASE + 1.5), kind.removeprefix("restart-"))
        return Fault(kind, None, began, time.time())
    name = rng.choice(FIRING)
    proc = procs[name]
    if kind == "pause":
        proc.signal(signal.SIGSTOP)
        time.sleep(LEASE + rng.uniform(0.5, 2.0))  # past the lease: its partitions move
        proc.signal(signal.SIGCONT)
    else:
        proc.signal(signal.SIGKILL)
        proc.proc.wait(10)
        time.sleep(rng.uniform(0.2, 1.0))
        procs[name] = again = NodeProcess(url, name, LEASE, logs[name])
        every.append(again)
        again.ready()
    return Fault(kind, name, began, time.time())


def first_of_each_log(every: list[NodeProcess]) -> list[int]:
    """One process per log file (a restarted node appends to its name's log)."""
    seen: dict[Path, int] = {}
    for i, proc in enumerate(every):
        seen.setdefault(proc.log, i)
    return list(seen.values())


def check(url: str, load: Load, faults: list[Fault], fired: list[dict[str, Any]]) -> None:
    rows = {
        key: (version, state, first_at, due)
        for key, version, state, first_at, due in sql(
            url, "SELECT key, version, state, first_attempt_at, due FROM wheel_timers"
        )
    }
    runs: defaultdict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for f in fired:
        runs[f["key"], f["version"]].append(f)
    live = {k: v for k, v in load.committed.items() if k not in load.cancelled}
    lost = [k for k, v in live.items() if not runs[k, v] or rows.get(k, ())[:2] != (v, 2)]
    assert not lost, f"{len(lost)} committed timers lost: {[(k, rows.get(k)) for k in lost[:5]]}"
    assert all(f["at"] >= f["due"] for f in fired), "a handler started before its due"
    early = [  # a retried one's due is its retry's: its first attempt came before that
        k
        for k, (_, _, first_at, due) in rows.items()
        if not flaky(k) and first_at is not None and first_at < due
    ]
    assert not early, early
    started = [k for k in load.cancelled if runs[k, load.committed[k]]]
    assert not started, f"cancelled versions started: {started[:5]}"
    assert {state for _, state, _, _ in rows.values()} <= {2, 3}, "a row left RUNNING or PENDING"
    unexplained = []
    again = 0
    for (key, _), attempts in runs.items():
        attempts.sort(key=lambda f: f["at"])
        needed = 2 if flaky(key) else 1
        for i in range(needed, len(attempts)):
            again += 1
            before, later = attempts[i - needed : i], attempts[i]
            hit = {f["node"] for f in before}
            if not any(
                before[0]["at"] - 0.5 <= fault.ended
                and fault.began <= later["at"]
                and (fault.node is None or fault.node in hit)
                for fault in faults
            ):
                unexplained.append((*before, later))
    assert not unexplained, f"run again with no fault to explain it: {unexplained[:3]}"
    kinds = Counter(fault.kind for fault in faults)
    late = sorted(f["at"] - f["due"] for f in fired if f["attempt"] == 1)
    p99, worst = late[int(len(late) * 0.99)], late[-1]
    worst_by_kind: dict[str, float] = {}
    for fault in faults:  # the timers due while it lasted, or within a second after it
        hit = [f["at"] - f["due"] for f in fired if fault.began <= f["due"] <= fault.ended + 1]
        if hit:
            worst_by_kind[fault.kind] = max(worst_by_kind.get(fault.kind, 0.0), *hit)
    print(
        f"\nworst lateness of timers due during a fault (or within 1 s after it), by kind:"
        f" { {k: round(v, 2) for k, v in worst_by_kind.items()} }"
    )
    print(
        f"\nsoak: {len(faults)} faults {dict(kinds)}; {len(load.committed)} timers committed,"
        f" {len(load.cancelled)} cancelled, {load.refused} calls refused during outages;"
        f" {len(fired)} firings, {again} re-runs after faults, none lost, none early;"
        f" first attempts late by p99 {p99:.2f} s, at most {worst:.2f} s"
    )
