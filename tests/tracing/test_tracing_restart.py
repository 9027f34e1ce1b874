"""The context survives a restart: scheduled (and compacted) in one process, fired in another
on the same SQLite file, the attempt links to the first process's scheduling span."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

CHILD = Path(__file__).with_name("restart_child.py")


def run(step: str, db: Path) -> dict[str, dict[str, object]]:
    done = subprocess.run(
        [sys.executable, str(CHILD), step, str(db)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_link_survives_a_restart_in_a_new_process(tmp_path: Path) -> None:
    db = tmp_path / "j.db"
    scheduled = run("schedule", db)
    fired = run("fire", db)
    assert fired["fire h"]["links"] == [scheduled["schedule h"]["span"]]
    assert fired["fire h"]["outcome"] == "succeeded"
