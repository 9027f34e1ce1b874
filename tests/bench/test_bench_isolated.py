"""APScheduler and huey rounds run in a child process, and the bench never imports them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench.compare import isolated


def test_a_peer_round_runs_in_a_child_and_brings_its_metrics_back(tmp_path: Path) -> None:
    imported_before = "huey" in sys.modules
    metrics = isolated.in_child("huey_schedule", tmp_path / "huey.db", 20, None)
    assert metrics["n"] == 20
    assert metrics["rate"] > 0
    assert (tmp_path / "huey.db").exists()  # the child wrote the store the parent named
    if not imported_before:
        assert "huey" not in sys.modules


def test_the_availability_checks_look_peers_up_without_importing_them() -> None:
    code = (
        "import sys; from bench.compare import peers; "
        "assert peers.apscheduler_missing() is None and peers.huey_missing() is None; "
        "print(sorted(m for m in ('apscheduler', 'sqlalchemy', 'huey') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_a_child_that_fails_reports_its_error(tmp_path: Path) -> None:
    with pytest.raises(isolated.ChildFailed, match="aps_schedule in a child process: "):
        isolated.in_child("aps_schedule", tmp_path / "no-such-dir" / "aps.db", 5)


def test_only_the_named_adapters_can_be_run() -> None:
    with pytest.raises(ValueError, match="no adapter 'os_system'"):
        isolated.in_child("os_system", Path("x"), 1)
