"""The product from an installed wheel (issue 9): ``scripts/check_installed.sh`` builds the
wheels, installs wheel-engine alone into a fresh virtual environment and runs ``--help``,
``bench --help``, ``bench --quick`` (not installed: one line, exit 1) and ``demo --quick``
from outside the repository, then installs the benchmark plug-in and reaches its ``--help``.
About 25 s with pip's cache warm."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "check_installed.sh"


@pytest.mark.slow
def test_installed_wheel_works_outside_the_repository() -> None:
    python = shutil.which("python3.11")
    if python is None:
        pytest.skip("python3.11 is not on PATH")
    done = subprocess.run(
        ["bash", str(SCRIPT), python], capture_output=True, text=True, timeout=300
    )
    tail = (done.stdout + done.stderr)[-3000:]
    assert done.returncode == 0, tail
    assert "all checks passed" in done.stdout, tail
    assert "wheel-engine: error: the benchmarks are not installed: pip install" in done.stderr
    assert "OK: the installed wheel works" in done.stdout, tail
