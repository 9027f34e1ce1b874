"""Fixtures for the journal's tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def db(tmp_path: Path) -> str:
    """A journal path in a fresh directory (the file does not exist yet)."""
    return str(tmp_path / "timers.db")
