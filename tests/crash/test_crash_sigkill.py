"""Real processes, real SIGKILL: the guarantees hold across any number of crashes at any moment.

A worker process (``crash_worker.py``) runs an engine on a journal file, schedules and cancels
timers with short delays and logs what it knows is committed (the intent log) and every handler
call (the fire log), both fsynced. The test SIGKILLs it at random moments (seeded), many times,
restarting it each time, then lets it drain, then runs a poison timer that SIGKILLs its own
process on every attempt, and checks the logs and the journal:

- every committed, uncancelled timer fired at least once (or was superseded by a later version
  of its key that itself fired or was cancelled);
- no timer whose cancel returned ``CANCELED`` fired after that cancel;
- nothing fired before its due by the wall clock;
- the poison timer ran exactly ``max_attempts`` times and ended ``DEAD``;
- versions are never reused; nothing is left live in the journal.

``WHEEL_ENGINE_SOAK=1`` runs many more kills; ``WHEEL_ENGINE_CRASH_SEED`` picks the seed.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from journal import Journal, TimerRow, apply

WORKER = Path(__file__).with_name("crash_worker.py")
ROOT = Path(__file__).resolve().parents[2]
SOAK = os.environ.get("WHEEL_ENGINE_SOAK") == "1"
SEED = int(os.environ.get("WHEEL_ENGINE_CRASH_SEED", "20261130"))
KILLS = 60 if SOAK else 8
TIMERS_PER_RUN = 200 if SOAK else 40
POISON_ATTEMPTS = 3  # crash_worker.POISON_ATTEMPTS
RUN_TIMEOUT = 60.0  # seconds a drain run may take before the test gives up on it
FINISHED = {"SUCCEEDED", "CANCELED", "DEAD"}


@dataclass
class Harness:
    tmp: Path
    durability: str
    rng: random.Random
    runs: int = 0
    kills: int = 0  # by the test
    self_kills: int = 0  # by the poison handler
    log: list[str] = field(default_factory=list)

    @property
    def db(self) -> Path:
        return self.tmp / "timers.db"

    @property
    def intents(self) -> Path:
        return self.tmp / "intents.jsonl"

    @property
    def fires(self) -> Path:
        return self.tmp / "fires.jsonl"

    def spawn(self, mode: str) -> subprocess.Popen[bytes]:
        cfg = {
            "db": str(self.db),
            "intents": str(self.intents),
            "fires": str(self.fires),
            "durability": self.durability,
            "mode": mode,
            "seed": self.rng.randrange(2**32),
            "run": self.runs,
            "timers": TIMERS_PER_RUN,
        }
        self.runs += 1
        path = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(path))
        err = open(self.tmp / f"worker-{cfg['run']}.err", "wb")  # noqa: SIM115
        with err:
            return subprocess.Popen(
                [sys.executable, str(WORKER), json.dumps(cfg)],
                stdout=err,
                stderr=err,
                env=env,
                cwd=self.tmp,
            )

    def stderr(self, run: int) -> str:
        return (self.tmp / f"worker-{run}.err").read_text(errors="replace")[-3000:]

    def wait_ready(self, proc: subprocess.Popen[bytes], run: int, timeout: float = 30.0) -> bool:
        """Wait for the worker's ``ready`` line (False if it died first)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                return False
            ready = json.dumps({"op": "ready", "pid": proc.pid, "run": run})  # as the worker does
            if self.intents.exists() and ready in self.intents.read_text():
                return True
            time.sleep(0.01)
        raise AssertionError(f"worker {proc.pid} never became ready: {self.stderr(run)}")

    def chaos_run(self) -> None:
        """One chaos worker, SIGKILLed at a random moment (sometimes during its startup)."""
        proc = self.spawn("chaos")
        run = self.runs - 1
        if self.rng.random() < 0.25:
            delay = self.rng.uniform(0.05, 0.6)  # from spawn: may land in import or recovery
        else:
            self.wait_ready(proc, run)
            delay = self.rng.uniform(0.05, 1.2)
        try:
            proc.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            self.kills += 1
            self.log.append(f"run {run}: killed after {delay:.3f}s")
            return
        self.expect_self_kill(proc, run)

    def expect_self_kill(self, proc: subprocess.Popen[bytes], run: int) -> None:
        assert proc.returncode == -signal.SIGKILL, (
            f"run {run} exited {proc.returncode} on its own: {self.stderr(run)}"
        )
        self.self_kills += 1
        self.log.append(f"run {run}: the poison handler killed it")

    def finish(self, mode: str, max_runs: int = 10) -> None:
        """Run ``mode`` workers until one exits cleanly (poison kills restart it)."""
        for _ in range(max_runs):
            proc = self.spawn(mode)
            run = self.runs - 1
            try:
                proc.wait(timeout=RUN_TIMEOUT)
            except subprocess.TimeoutExpired as exc:
                proc.kill()
                proc.wait()
                raise AssertionError(
                    f"{mode} run {run} did not finish: {self.stderr(run)}"
                ) from exc
            if proc.returncode == 0:
                self.log.append(f"run {run}: {mode} finished")
                return
            self.expect_self_kill(proc, run)
        raise AssertionError(f"{mode} never finished in {max_runs} runs")


def read_log(path: Path) -> list[dict[str, Any]]:
    """The JSON lines of a log. Each line is one write(2), so none is ever torn."""
    if not path.exists():
        return []
    data = path.read_text()
    assert not data or data.endswith("\n"), f"torn last line in {path.name}: {data[-200:]!r}"
    return [json.loads(line) for line in data.splitlines()]


async def read_journal(path: Path) -> dict[str, TimerRow]:
    """The final state by recovery, cross-checked key by key against the snapshot row plus
    the key's tail records folded with :func:`journal.apply` (the reference fold)."""
    journal = await Journal.open(path, readonly=True)
    try:
        rows = (await journal.recover()).timers
        for key, row in rows.items():
            state: dict[str, TimerRow] = {}
            snap = await journal.snapshot_row(key)
            if snap is not None:
                state[key] = snap
            for _, record in await journal.history(key):
                apply(state, record)
            assert state.get(key) == row, f"recover() says {row}, the records {state.get(key)}"
        return rows
    finally:
        await journal.close()


def check(intents: list[dict[str, Any]], fires: list[dict[str, Any]], rows: dict[str, TimerRow]):
    """Every assertion of the test, on the two logs and the final journal. Returns counts."""
    schedules = [i for i in intents if i["op"] == "schedule"]
    cancel_starts = {(i["key"], i["version"]) for i in intents if i["op"] == "cancel-start"}
    canceled = {(i["key"], i["version"]): i["mono"] for i in intents if i["op"] == "canceled"}
    assert schedules, "no schedule was ever committed: the kills came too early"
    assert fires, "nothing ever fired"

    # Versions are never reused: one version, one key and one due, in both logs.
    owner: dict[int, tuple[str, float]] = {}  # version -> (key, due it was scheduled for)
    for s in schedules:
        if not s["kept"]:  # a kept timer's due may be its retry's: only its key is checked
            seen = owner.setdefault(s["version"], (s["key"], s["due"]))
            assert seen == (s["key"], s["due"]), f"version {s['version']} reused: {seen} and {s}"
    for s in schedules:
        if s["kept"] and s["version"] in owner:
            assert owner[s["version"]][0] == s["key"], f"version {s['version']} reused: {s}"
    fire_owner: dict[int, str] = {}
    for f in fires:
        assert fire_owner.setdefault(f["version"], f["key"]) == f["key"], f"version reused: {f}"
        if f["version"] in owner:
            assert owner[f["version"]][0] == f["key"], f"version {f['version']} fired as {f}"
    for key, row in rows.items():
        assert fire_owner.get(row.version, key) == key
        assert owner.get(row.version, (key,))[0] == key

    # Never early, by the wall clock: not before the firing's due, nor the scheduled due.
    for f in fires:
        assert f["wall"] >= f["due"], f"fired early: {f}"
        if f["version"] in owner:
            assert f["wall"] >= owner[f["version"]][1], f"fired before its scheduled due: {f}"
        if f["attempt"] == 1 and f["version"] in owner:
            assert f["due"] == owner[f["version"]][1], f"first attempt with another due: {f}"

    # Cancel is final: nothing of that version fired after the cancel was called.
    for f in fires:
        mono = canceled.get((f["key"], f["version"]))
        assert mono is None or f["mono"] < mono, f"fired after its cancel returned CANCELED: {f}"

    # At least once: every committed, uncancelled version fired, unless a later version of its
    # key replaced it (that one is then held to the rules below through the journal's row), or
    # a cancel of it was under way and committed.
    fired_versions: dict[str, set[int]] = defaultdict(set)
    for f in fires:
        fired_versions[f["key"]].add(f["version"])
    unfired = []
    for s in schedules:
        key, version = s["key"], s["version"]
        row = rows.get(key)
        assert row is not None, f"committed timer lost: {s}"
        assert row.version >= version, f"{key} went back to an older version: {s}, {row}"
        if (key, version) in canceled or any(v >= version for v in fired_versions[key]):
            continue
        if row.version > version:
            continue  # replaced by a later version
        if row.state == "CANCELED" and (key, version) in cancel_starts:
            continue  # a cancel that was under way when the worker was killed, committed
        unfired.append((s, row))
    assert not unfired, f"committed, uncancelled, never fired: {unfired[:5]}"

    # Nothing is live at the end; every final version (logged or not) ended as it may.
    for key, row in rows.items():
        assert row.state in FINISHED, f"{key} is still {row.state} after the final drain: {row}"
        if key.startswith("poison"):
            continue
        cancel_requested = (key, row.version) in cancel_starts
        if row.state == "CANCELED":
            assert cancel_requested, f"{key} cancelled by nobody: {row}"
        else:
            assert row.state == "SUCCEEDED", f"{key} ended {row}"
            assert row.version in fired_versions[key], f"{key} SUCCEEDED, never fired: {row}"

    # The poison timers: max_attempts attempts, then DEAD (not retried forever).
    for key in ("poison-chaos", "poison-final"):
        row = rows.get(key)  # poison-chaos is missing only if every early run was killed early
        assert row is not None or key == "poison-chaos", f"{key} lost"
        if row is None:
            continue
        assert row.state == "DEAD" and row.attempts == POISON_ATTEMPTS, f"{key}: {row}"
        attempts = [f["attempt"] for f in fires if f["key"] == key]
        assert len(attempts) == len(set(attempts)) and set(attempts) <= {1, 2, 3}, attempts
    final = [f["attempt"] for f in fires if f["key"] == "poison-final"]
    assert final == [1, 2, 3], f"the poison timer ran {final}, not exactly 3 times"
    return {
        "schedules": len(schedules),
        "fires": len(fires),
        "canceled": len(canceled),
    }


@pytest.mark.slow
@pytest.mark.parametrize("durability", ["normal", "full"])
def test_sigkill_at_random_moments_keeps_every_guarantee(tmp_path: Path, durability: str) -> None:
    harness = Harness(tmp_path, durability, random.Random(f"{SEED}-{durability}"))
    started = time.monotonic()
    while harness.kills < KILLS:
        harness.chaos_run()
    harness.finish("drain")  # no new timers: everything left fires
    harness.finish("poison")  # alone in the engine: no other crash can hide an attempt
    rows = asyncio.run(read_journal(harness.db))
    counts = check(read_log(harness.intents), read_log(harness.fires), rows)
    print(
        f"{durability}: {harness.runs} runs, {harness.kills} kills, {harness.self_kills} poison"
        f" kills, {counts}, {time.monotonic() - started:.1f}s"
    )
