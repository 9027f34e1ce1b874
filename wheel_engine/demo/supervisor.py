"""The demo's supervisor: runs the worker, kills it with SIGKILL partway, restarts it.

It plays the part of a process manager (systemd, Kubernetes) and of an operator watching:
it starts worker #1 on a fresh orders database and journal, shows progress read from the
orders database, kills the worker ``plan.kill_at`` seconds into the plan (no cleanup, no
flush), starts worker #2 on the same journal, waits for it to finish, then has the run
judged (:mod:`~wheel_engine.demo.verdict`) and reported (:mod:`~wheel_engine.demo.report`).
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from wheel_engine.demo import report
from wheel_engine.demo.plan import JOURNAL_DB, ORDERS_DB, Plan, connect, transaction, write_plan
from wheel_engine.demo.verdict import check

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, TaskID

__all__ = ["run"]

#: Seconds between two looks at the worker and the orders database.
POLL_SECONDS = 0.1
#: Seconds a worker may take to get ready (recover, take the lock) before the run is failed.
READY_TIMEOUT = 30.0


def run(
    *,
    orders: int = 3000,
    quick: bool = False,
    seed: int | None = None,
    workdir: str | os.PathLike[str] | None = None,
    crash: bool = True,
    json_mode: bool = False,
    console: Console | None = None,
) -> int:
    """Run the demo end to end; returns the exit code (0: every check passed, 2: bad input)."""
    from rich.console import Console

    console = console or Console()
    if orders < 1:
        console.print("[red]--orders must be at least 1[/red]")
        return 2
    seed = seed if seed is not None else random.randrange(1_000_000)
    plan = Plan.make(orders, quick=quick, seed=seed, crash=crash)
    with contextlib.ExitStack() as stack:
        if workdir is None:
            work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="wheel-demo-")))
        else:
            work = _fresh_dir(Path(workdir))
        write_plan(work, plan)
        if not json_mode:
            kept = "removed at the end: --dir DIR keeps them" if workdir is None else "kept"
            console.print(
                f"[bold]wheel-engine demo[/bold]: {plan.orders} orders, payment timeouts "
                f"{plan.timeout_min:g}-{plan.timeout_max:g}s, created over {plan.window:g}s "
                f"(seed {seed}); a sweep every {plan.sweep_every:g}s (a recurring timer) backs "
                f"them up and must catch the {plan.lost} orders whose timer the service deletes "
                f"on purpose; orders in {work / ORDERS_DB}, timers in {work / JOURNAL_DB} "
                f"({kept})"
            )
        started = time.time()
        supervisor = Supervisor(work, plan, console, json_mode=json_mode)
        supervisor.supervise()
        outcome = check(work, plan, worker_codes=supervisor.codes, killed=supervisor.killed)
        outcome.figures["seconds"] = time.time() - started
        outcome.figures["seed"] = seed
        outcome.figures["quick"] = quick
        if json_mode:
            report.print_json(outcome)
        else:
            report.print_report(console, outcome)
            if not outcome.ok and supervisor.codes and supervisor.codes[-1] != 0:
                report.print_worker_log(console, supervisor.log_path)
            if workdir is None:
                console.print(f"removing {work} (the demo's databases; --dir DIR keeps them)")
            else:
                console.print(
                    f"the databases stay in {work}: wheel-engine status {work / JOURNAL_DB}"
                )
        return 0 if outcome.ok else 1
    raise AssertionError("unreachable")  # pragma: no cover


def _fresh_dir(work: Path) -> Path:
    """``work``, created if missing, without the databases of an earlier run."""
    work.mkdir(parents=True, exist_ok=True)
    for name in (ORDERS_DB, JOURNAL_DB):
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                (work / f"{name}{suffix}").unlink()
    return work


class Supervisor:
    """Worker processes one after the other: start, watch, kill once, restart, wait."""

    def __init__(self, work: Path, plan: Plan, console: Console, *, json_mode: bool) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        self.work = work
        self.plan = plan
        self.json_mode = json_mode
        self.codes: list[int] = []  #: exit codes of the workers, in order (-9: killed)
        self.killed = False
        self.number = 1
        self.started = time.time()
        self.progress: Progress = Progress(
            TextColumn("{task.description:<28}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[info]}"),
            console=console,
            disable=json_mode,
            transient=False,
        )

    @property
    def log_path(self) -> Path:
        return self.work / f"worker-{self.number}.log"

    def say(self, message: str) -> None:
        if not self.json_mode:
            self.progress.console.print(message)

    def supervise(self) -> None:
        """Run workers until one finishes (or the run overruns its deadline)."""
        proc = self.spawn()
        try:
            with self.progress:
                bars = self.add_bars()
                while True:
                    code = proc.poll()
                    t0 = read_t0(self.work)
                    if code is None and self.time_to_kill(t0):
                        proc = self.kill_and_restart(proc, t0)
                        continue
                    if code is not None:
                        self.codes.append(code)
                        break
                    if self.overdue(t0):
                        proc.kill()
                        proc.wait()
                        self.codes.append(proc.returncode)
                        self.say("[red]the worker did not finish in time[/red]")
                        break
                    self.show(bars)
                    time.sleep(POLL_SECONDS)
                self.show(bars, final=True)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    def spawn(self) -> subprocess.Popen[bytes]:
        """Worker number ``self.number``, its output in ``worker-N.log``."""
        with self.log_path.open("wb") as log:
            return subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "wheel_engine.demo.worker",
                    str(self.work),
                    str(self.number),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )

    def time_to_kill(self, t0: float | None) -> bool:
        return (
            self.plan.crash
            and not self.killed
            and t0 is not None
            and time.time() >= t0 + self.plan.kill_at
        )

    def kill_and_restart(
        self, proc: subprocess.Popen[bytes], t0: float | None
    ) -> subprocess.Popen[bytes]:
        """SIGKILL: no cleanup, no flush, no close of the journal. Then a new worker."""
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        killed_at = time.time()
        mark_killed(self.work, self.number, killed_at)
        self.codes.append(proc.returncode)
        self.killed = True
        unpaid = read_counts(self.work)["unpaid"]
        self.say(
            f"[yellow]SIGKILL[/yellow] worker #{self.number} (pid {proc.pid}) at "
            f"t={killed_at - (t0 or killed_at):.2f}s with {unpaid} orders unpaid; "
            "restarting it on the same journal"
        )
        self.number += 1
        return self.spawn()

    def overdue(self, t0: float | None) -> bool:
        now = time.time()
        if t0 is None:
            return now > self.started + READY_TIMEOUT
        return now > t0 + self.plan.deadline

    def add_bars(self) -> tuple[TaskID, TaskID, TaskID]:
        add = self.progress.add_task
        return (
            add("orders created", total=self.plan.orders, info=""),
            add("orders paid or cancelled", total=self.plan.orders, info=""),
            add("timeouts fired", total=None, info=""),
        )

    def show(self, bars: tuple[TaskID, TaskID, TaskID], *, final: bool = False) -> None:
        created, settled, fired = bars
        counts = read_counts(self.work)
        update = self.progress.update
        update(created, completed=counts["created"])
        update(
            settled,
            completed=counts["paid"] + counts["cancelled"],
            info=f"paid {counts['paid']}, cancelled {counts['cancelled']}",
        )
        total = counts["firings"] if final else None
        update(fired, completed=counts["firings"], total=total, info="")


def read_counts(workdir: Path) -> dict[str, int]:
    """Orders by status, firings and payments so far (for the progress bars)."""
    conn = sqlite3.connect(workdir / ORDERS_DB, timeout=5.0)
    try:
        status = dict(conn.execute("SELECT status, count(*) FROM orders GROUP BY status"))
        firings = conn.execute("SELECT count(*) FROM firings").fetchone()[0]
        payments = conn.execute("SELECT count(*) FROM payments").fetchone()[0]
    finally:
        conn.close()
    return {
        "created": sum(status.values()),
        "unpaid": status.get("UNPAID", 0),
        "paid": status.get("PAID", 0),
        "cancelled": status.get("CANCELLED", 0),
        "firings": firings,
        "payments": payments,
    }


def read_t0(workdir: Path) -> float | None:
    """The plan's t0, set by the first worker once ready; None before."""
    conn = sqlite3.connect(workdir / ORDERS_DB, timeout=5.0)
    try:
        row = conn.execute("SELECT value FROM meta WHERE name = 't0'").fetchone()
    finally:
        conn.close()
    return float(row[0]) if row else None


def mark_killed(workdir: Path, number: int, when: float) -> None:
    """Note in the orders database when worker ``number`` was killed."""
    conn = connect(workdir / ORDERS_DB)
    try:
        with transaction(conn):
            conn.execute("UPDATE workers SET killed_at = ? WHERE n = ?", (when, number))
    finally:
        conn.close()
