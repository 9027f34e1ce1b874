"""Packaging manners: licence, platforms, quiet logging by default, no rich in the library."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_license_file_matches_pyproject() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")


def test_platforms_are_stated() -> None:
    classifiers = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["classifiers"]
    assert "Operating System :: POSIX" in classifiers
    assert not any("Windows" in c or c == "Operating System :: OS Independent" for c in classifiers)


def test_import_is_quiet_and_light() -> None:
    code = (
        "import logging, sys, wheel_engine\n"
        "for name in ('wheel_engine', 'journal'):\n"
        "    handlers = logging.getLogger(name).handlers\n"
        "    assert any(isinstance(h, logging.NullHandler) for h in handlers), name\n"
        "logging.getLogger('journal.writer').warning('must not reach stderr')\n"
        "assert 'rich' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""


def test_no_module_of_the_library_is_over_400_lines() -> None:
    """The house rule (a module per concept, none over 400 lines), checked: a merge once left
    ``scheduling.py`` at 409 lines unnoticed."""
    too_long = {
        str(path.relative_to(ROOT)): count
        for package in ("wheel_engine", "journal")
        for path in sorted((ROOT / package).rglob("*.py"))
        if (count := len(path.read_text().splitlines())) > 400
    }
    assert too_long == {}
