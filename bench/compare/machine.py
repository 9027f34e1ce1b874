"""The machine a run was measured on: CPU, Python, SQLite, the build, versions, commit, date."""

from __future__ import annotations

import contextlib
import os
import platform
import sqlite3
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = ["machine_info"]

#: The distributions whose versions a run reports.
DISTRIBUTIONS = (
    "wheel-engine",
    "wheel-engine-bench",
    "uvloop",
    "apscheduler",
    "sqlalchemy",
    "huey",
    "msgpack",
    "aiosqlite",
    "matplotlib",
)


def machine_info() -> dict[str, Any]:
    """Everything a reader needs to judge the figures, as JSON-ready data."""
    return {
        "nproc": os.cpu_count(),
        "cpu": _cpu(),
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "sqlite": sqlite3.sqlite_version,
        "build": _build(),
        "versions": {dist: _version(dist) for dist in DISTRIBUTIONS},
        "git_commit": _commit(),
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def _build() -> str:
    """``compiled`` or ``pure``: which wheel-engine this process runs (``wheel_engine.COMPILED``),
    ``unknown`` if it cannot be imported or does not say."""
    try:
        import wheel_engine
    except Exception:
        return "unknown"
    compiled = getattr(wheel_engine, "COMPILED", None)
    return "unknown" if compiled is None else "compiled" if compiled else "pure"


def _cpu() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def _commit() -> str:
    """``$WHEEL_ENGINE_BENCH_COMMIT``, else ``git describe`` of the checkout the code runs from
    (``<hash>-dirty`` when tracked files differ from the commit); empty when installed."""
    commit = os.environ.get("WHEEL_ENGINE_BENCH_COMMIT", "")
    if commit:
        return commit
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        return subprocess.run(
            ["git", "describe", "--always", "--dirty", "--abbrev=7"],
            cwd=Path(__file__).resolve().parents[2],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        ).stdout.strip()
    return ""
