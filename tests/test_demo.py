"""The order-timeout demo, quick mode: a real worker process, SIGKILLed and restarted."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from wheel_engine import demo


def run_demo(*args: str) -> tuple[int, dict[str, object], str]:
    done = subprocess.run(
        [sys.executable, "-m", "wheel_engine.cli", "demo", "--quick", "--json", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    try:
        data = json.loads(done.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"no JSON from the demo:\n{done.stdout}\n{done.stderr}")
    return done.returncode, data, done.stderr


@pytest.mark.slow
def test_quick_demo_survives_sigkill_and_every_check_passes(tmp_path: Path) -> None:
    code, data, err = run_demo("--orders", "300", "--seed", "11", "--dir", str(tmp_path))
    checks = data["checks"]
    assert isinstance(checks, list)
    assert code == 0, (checks, err)
    assert data["ok"] is True
    assert all(c["ok"] for c in checks)
    names = " ".join(c["check"] for c in checks)
    assert "killed (SIGKILL)" in names
    figures = data["figures"]
    assert isinstance(figures, dict)
    assert figures["orders"] == 300
    assert figures["paid"] + figures["cancelled"] == 300
    assert figures["cancelled"] > 0 and figures["paid"] > 0
    workers = figures["workers"]
    assert [w["killed"] for w in workers] == [True, False]
    assert workers[1]["recovered_timers"] > 0
    assert figures["lateness_p50_ms"] is not None and figures["lateness_p50_ms"] >= 0
    assert figures["timers_deleted_on_purpose"] == 3 and figures["swept"] >= 3
    assert figures["sweep_runs"] > 0

    # The checks are real: spoil the outcome and they fail.
    plan = demo.Plan.make(300, quick=True, seed=11, crash=True)
    assert demo.check(tmp_path, plan, worker_codes=[-9, 0], killed=True).ok
    con = sqlite3.connect(tmp_path / demo.ORDERS_DB)
    paid = con.execute("SELECT id FROM orders WHERE status = 'PAID' LIMIT 1").fetchone()[0]
    con.execute("UPDATE orders SET status = 'CANCELLED' WHERE id = ?", (paid,))
    unpaid = con.execute("SELECT order_id FROM firings LIMIT 1").fetchone()[0]
    con.execute("UPDATE orders SET status = 'UNPAID' WHERE id = ?", (unpaid,))
    con.execute(  # as if a timer had cancelled an order whose timer was deleted
        "UPDATE orders SET cancelled_by = 'timer' WHERE id IN "
        "(SELECT id FROM orders WHERE timer_deleted_at IS NOT NULL LIMIT 1)"
    )
    con.commit()
    con.close()
    outcome = demo.check(tmp_path, plan, worker_codes=[-9, 0], killed=True)
    failed = {name for name, ok, _ in outcome.checks if not ok}
    assert "no paid order was cancelled" in failed
    assert "every unpaid order was cancelled" in failed
    assert "the sweep caught every order whose timer was deleted" in failed
    assert not outcome.ok


@pytest.mark.slow
def test_demo_human_output_without_crash(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "wheel_engine.demo", "--orders", "100", "--quick", "--no-crash"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "all checks passed" in done.stdout
    assert "lateness" in done.stdout and "SIGKILL" not in done.stdout


def test_plan_shares() -> None:
    plan = demo.Plan.make(2000, quick=True, seed=3, crash=True)
    assert plan.deadline < 60
    assert demo.Plan.make(3000, quick=False, seed=3, crash=True).deadline < 60


@pytest.mark.slow
def test_the_quick_demo_says_what_its_lateness_is_and_that_it_removes_its_files() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "wheel_engine.cli", "demo", "--quick", "--orders", "100"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "300"},  # rich wraps at the terminal's width
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = " ".join(done.stdout.replace("\u2502", " ").split())  # a table cell's wrapped lines
    assert "(removed at the end: --dir DIR keeps them)" in out
    match = re.search(r"removing (/\S+) \(the demo's databases; --dir DIR keeps them\)", out)
    assert match is not None, out
    assert not Path(match.group(1)).exists()
    assert re.search(r"fired minus due \(wall clock\) of the \d+ timers a running worker", out)
    assert "--quick: short timeouts, few timers" in out
