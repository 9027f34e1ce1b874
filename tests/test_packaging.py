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


def _project() -> dict[str, object]:
    project: dict[str, object] = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return project


def test_metadata_names_its_authors_and_only_tested_pythons() -> None:
    project = _project()
    assert project["authors"] == [{"name": "the wheel-engine authors"}]
    assert "the wheel-engine authors" in (ROOT / "LICENSE").read_text()
    classifiers = project["classifiers"]
    assert isinstance(classifiers, list)
    versions = [c for c in classifiers if c.startswith("Programming Language :: Python :: 3.")]
    # .ci/run: compiled on 3.11, pure on a 3.13 built from Debian's source archive (no 3.12
    # reaches CI: see pyproject.toml)
    assert versions == [
        "Programming Language :: Python :: 3.11",
        "Programming Language :: Python :: 3.13",
    ]
    ci = (ROOT / ".ci" / "run").read_text()
    assert "PY=python3.11" in ci and "debian_cpython.sh 3.13" in ci


def test_the_development_toolchain_is_not_published_metadata() -> None:
    """``dev`` and ``docs`` were extras: a user saw ``wheel-engine[dev]`` offered on the package
    page. They are requirements-dev.txt, which ``make`` installs with every real extra."""
    extras = _project()["optional-dependencies"]
    assert isinstance(extras, dict)
    assert not {"dev", "docs", "bench"} & set(extras)
    assert not any("wheel-engine" in r for reqs in extras.values() for r in reqs)
    tools = (ROOT / "requirements-dev.txt").read_text()
    for needed in ("pytest", "hypothesis", "ruff", "mypy", "mkdocs-material", "-e ./bench"):
        assert needed in tools, needed
    makefile = (ROOT / "Makefile").read_text()
    assert "-r requirements-dev.txt" in makefile and '"optional-dependencies"' in makefile
