"""SIGKILL soak: a recurrence ``every=0.2`` on a SQLite journal, its process killed 15+ times.

Every nominal occurrence from the first to the last fires at least once (``catch_up="all"``
fires those a kill's downtime missed), none before its nominal time, and an occurrence fires
twice only when a kill interrupted it (at most one duplicate per kill). Short by default
(``WHEEL_ENGINE_SOAK_KILLS``, default 15, makes it longer).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from journal_view import attempted, records_of, scheduled

from wheel_engine.recurring.rule import occurrence_key, occurrence_of

pytestmark = pytest.mark.slow

WORKER = Path(__file__).with_name("soak_worker.py")
STEP = 0.2


def test_every_occurrence_fires_across_sigkills(tmp_path: Path) -> None:
    kills = int(os.environ.get("WHEEL_ENGINE_SOAK_KILLS", "15"))
    journal, log = tmp_path / "j.db", tmp_path / "fired.log"
    rng = random.Random(25)
    for _ in range(kills):
        proc = subprocess.Popen([sys.executable, str(WORKER), str(journal), str(log)])
        time.sleep(rng.uniform(0.5, 1.1))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    subprocess.run([sys.executable, str(WORKER), str(journal), str(log), "1.5"], check=True)
    fired = [line.split() for line in log.read_text().splitlines()]
    counts = Counter(key for key, _, _ in fired)
    nominals = sorted(occurrence_of(key)[1] for key in counts)  # type: ignore[index]
    first, last = nominals[0], nominals[-1]
    expected = round((last - first) / STEP) + 1
    assert len(nominals) == expected, "an occurrence between the first and the last is missing"
    assert all(float(at) >= occurrence_of(key)[1] for key, at, _ in fired)  # type: ignore[index]
    duplicates = sum(n - 1 for n in counts.values())
    assert duplicates <= kills
    print(f"soak: {kills} kills, {expected} occurrences, {len(fired)} runs, {duplicates} twice")


def test_a_sigkill_right_after_an_attempt_commit_loses_and_doubles_nothing(tmp_path: Path) -> None:
    """Killed right after the commit of the first occurrence's attempt, before its handler
    started: the journal holds the next occurrence with that attempt; after a restart the
    series goes on, every occurrence fired once, none created twice."""
    journal, log = tmp_path / "j.db", tmp_path / "fired.log"
    env = {**os.environ, "SOAK_KILL_AFTER_ATTEMPT": "1"}
    killed = subprocess.run([sys.executable, str(WORKER), str(journal), str(log)], env=env)
    assert killed.returncode == -signal.SIGKILL
    assert not log.exists() or not log.read_text()  # its handler never started
    records = records_of(journal)
    (first,) = attempted(records)
    name, nominal = occurrence_of(first)  # type: ignore[misc]
    assert occurrence_key(name, nominal + STEP) in scheduled(records)  # committed with it
    subprocess.run([sys.executable, str(WORKER), str(journal), str(log), "1.5"], check=True)
    fired = [line.split() for line in log.read_text().splitlines()]
    counts = Counter(key for key, _, _ in fired)
    assert first in counts and set(counts.values()) == {1}, counts  # ran after, once
    nominals = sorted(occurrence_of(key)[1] for key in counts)  # type: ignore[index]
    assert len(nominals) == round((nominals[-1] - nominals[0]) / STEP) + 1 >= 5
    assert set(scheduled(records_of(journal)).values()) == {1}  # none created twice
