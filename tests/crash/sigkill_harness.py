"""Runs ``crash_worker.py`` processes on one journal and SIGKILLs them where a test aims.

A :class:`Harness` owns one temporary directory: the journal, the two logs the workers append
to, and each run's stderr. Its ``*_run`` methods start one worker of a mode, kill it at a
seeded random moment chosen for that mode, and record where the kill landed (``hits``):

- ``chaos_run``: anywhere, sometimes during startup;
- ``queue_run``: shortly after a backlog comes due (timers waiting behind ``max_concurrency``);
- ``bulk_run``: inside a ``schedule_many`` or a compaction (aimed at the worker's
  ``batch-start`` / ``compact-start`` line), or anywhere.

Where a kill landed is read back from the run's own intent lines after the kill (a kill aimed
at a window may miss it on a slow machine; it then counts where it did land).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from random import Random
from typing import Any

from sigkill_checks import parse_lines

WORKER = Path(__file__).with_name("crash_worker.py")
ROOT = Path(__file__).resolve().parents[2]
RUN_TIMEOUT = 90.0  # seconds a drain run may take before the test gives up on it
READY_TIMEOUT = 30.0  # seconds a worker may take to start (recovery of a big journal included)
MARK_TIMEOUT = 10.0  # seconds to wait for the line a kill is aimed at before killing anyway
POLL = 0.001  # seconds between looks at the intent log while aiming a kill
Line = dict[str, Any]


@dataclass
class Harness:
    tmp: Path
    durability: str
    rng: Random
    timers: int  # per chaos / bulk run
    options: dict[str, Any] = field(default_factory=dict)  # more worker config (all runs)
    runs: int = 0
    kills: int = 0  # by the test
    self_kills: int = 0  # by the poison handler
    hits: Counter[str] = field(default_factory=Counter)  # where the test's kills landed
    log: list[str] = field(default_factory=list)
    _lines: list[Line] = field(default_factory=list)  # the current run's intent lines so far
    _offset: int = 0  # how far the intent log has been read
    started: float = field(default_factory=time.monotonic)

    @property
    def db(self) -> Path:
        return self.tmp / "timers.db"

    @property
    def intents(self) -> Path:
        return self.tmp / "intents.jsonl"

    @property
    def fires(self) -> Path:
        return self.tmp / "fires.jsonl"

    def clock(self) -> str:
        return f"{time.monotonic() - self.started:.1f}s"

    @property
    def crashes(self) -> int:
        return self.kills + self.self_kills

    def spawn(self, mode: str) -> subprocess.Popen[bytes]:
        cfg = {
            "db": str(self.db),
            "intents": str(self.intents),
            "fires": str(self.fires),
            "durability": self.durability,
            "mode": mode,
            "seed": self.rng.randrange(2**32),
            "run": self.runs,
            "timers": self.timers,
            **self.options,
        }
        self.runs += 1
        self._offset = self.intents.stat().st_size if self.intents.exists() else 0
        self._lines = []
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

    def run_lines(self) -> list[Line]:
        """The current run's intent lines, read on from where the last look stopped."""
        if self.intents.exists():
            with self.intents.open("rb") as log:
                log.seek(self._offset)
                data = log.read()
            whole = data[: data.rfind(b"\n") + 1]  # a line being written is read next time
            self._offset += len(whole)
            self._lines.extend(parse_lines(whole, self.intents.name))
        return self._lines

    def wait_for(
        self, proc: subprocess.Popen[bytes], match: Callable[[Line], bool], timeout: float
    ) -> Line | None:
        """The first line of this run that ``match``es (None if the worker died or it timed out)."""
        deadline = time.monotonic() + timeout
        seen = 0
        while time.monotonic() < deadline:
            lines = self.run_lines()
            for line in lines[seen:]:
                if match(line):
                    return line
            seen = len(lines)
            if proc.poll() is not None:
                return None
            time.sleep(POLL)
        return None

    def wait_ready(self, proc: subprocess.Popen[bytes], run: int) -> bool:
        """Wait for the worker's ``ready`` line (False if it died first)."""
        if self.wait_for(proc, lambda line: line["op"] == "ready", READY_TIMEOUT) is not None:
            return True
        if proc.poll() is None:
            raise AssertionError(f"worker {proc.pid} never became ready: {self.stderr(run)}")
        return False

    def kill_after(self, proc: subprocess.Popen[bytes], run: int, delay: float) -> None:
        """SIGKILL after ``delay`` seconds, unless the poison handler killed it first."""
        try:
            proc.wait(timeout=max(0.0, delay))
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            self.kills += 1
            where = self.landed()
            self.hits[where] += 1
            self.log.append(f"run {run}: killed after {delay:.3f}s, {where}, at {self.clock()}")
            return
        self.expect_self_kill(proc, run)

    def landed(self) -> str:
        """Where the kill of the current run landed, by the run's last intent lines."""
        ops = [line["op"] for line in self.run_lines()]
        if "ready" not in ops:
            return "startup"
        for start, end, window in (
            ("batch-start", "batch", "schedule_many"),
            ("compact-start", "compact-done", "compaction"),
        ):
            if start in ops and (end not in ops or ops[::-1].index(start) < ops[::-1].index(end)):
                return window
        return "queued" if "due" in ops else "elsewhere"

    def expect_self_kill(self, proc: subprocess.Popen[bytes], run: int) -> None:
        assert proc.returncode == -signal.SIGKILL, (
            f"run {run} exited {proc.returncode} on its own: {self.stderr(run)}"
        )
        self.self_kills += 1
        self.log.append(f"run {run}: the poison handler killed it")

    # ------------------------------------------------------------------ the modes' kills
    def startup_kill(self, proc: subprocess.Popen[bytes], run: int) -> None:
        """From spawn: may land in import, recovery or the first firings."""
        self.kill_after(proc, run, self.rng.uniform(0.05, 0.6))

    def chaos_run(self) -> None:
        """One chaos worker, SIGKILLed at a random moment (sometimes during its startup)."""
        proc = self.spawn("chaos")
        run = self.runs - 1
        if self.rng.random() < 0.25:
            self.startup_kill(proc, run)
        elif self.wait_ready(proc, run):
            self.kill_after(proc, run, self.rng.uniform(0.05, 1.2))
        else:
            self.expect_self_kill(proc, run)

    def queue_run(self) -> None:
        """One queue worker, killed 0.25 to 0.8 s after its backlog came due (sometimes
        during startup): by then two workers have run some 10 to 30 of them, the rest wait."""
        proc = self.spawn("queue")
        run = self.runs - 1
        if self.rng.random() < 0.1:
            self.startup_kill(proc, run)
            return
        due = self.wait_for(proc, lambda line: line["op"] == "due", READY_TIMEOUT)
        if due is None:
            self.kill_after(proc, run, 0.0)  # a poison kill, or it never became due: say why
            return
        self.kill_after(proc, run, due["at"] + self.rng.uniform(0.25, 0.8) - time.time())

    def bulk_run(self) -> None:
        """One bulk worker, killed inside a schedule_many or a compaction, or anywhere."""
        proc = self.spawn("bulk")
        run = self.runs - 1
        roll = self.rng.random()
        if roll < 0.1:
            self.startup_kill(proc, run)
            return
        if roll < 0.45:
            number = self.rng.randrange(3)
            aim: Callable[[Line], bool] = lambda line: (  # noqa: E731
                line["op"] == "batch-start" and line["number"] == number
            )
        elif roll < 0.8:
            aim = lambda line: line["op"] == "compact-start"  # noqa: E731
        else:
            aim = lambda line: line["op"] == "ready"  # noqa: E731
        mark = self.wait_for(proc, lambda line: aim(line) or line["op"] == "idle", MARK_TIMEOUT)
        if mark is not None and mark["op"] == "ready":
            self.kill_after(proc, run, self.rng.uniform(0.05, 1.0))
        else:
            self.kill_after(proc, run, self.rng.uniform(0.0, 0.015))

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
                self.log.append(f"run {run}: {mode} finished at {self.clock()}")
                return
            self.expect_self_kill(proc, run)
        raise AssertionError(f"{mode} never finished in {max_runs} runs")
