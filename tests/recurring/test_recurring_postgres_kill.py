"""Two node processes on PostgreSQL run one recurrence; the one running it (the holder of its
name's partition, #25) is SIGKILLed and the series goes on on the other within a lease: no
occurrence missing, each fired once but the one the kill may have interrupted, none early."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from pg_cluster import REQUIRED, psycopg

from wheel_engine.recurring.rule import occurrence_of

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(psycopg is None and not REQUIRED, reason="psycopg is not installed"),
]

WORKER = Path(__file__).with_name("soak_worker.py")
LEASE = 1.5


def _fired(log: Path) -> list[list[str]]:
    return [line.split() for line in log.read_text().splitlines()] if log.exists() else []


def test_the_series_goes_on_after_a_node_is_killed(pg_url: str, tmp_path: Path) -> None:
    log = tmp_path / "fired.log"
    nodes = {
        name: subprocess.Popen([sys.executable, str(WORKER), pg_url, str(log), "14", name])
        for name in ("a", "b")
    }
    try:
        deadline = time.monotonic() + 20
        while len(_fired(log)) < 15:  # 3 s of the series: both nodes are up and balanced
            assert time.monotonic() < deadline, "the series never got going"
            time.sleep(0.05)
        running = _fired(log)[-1][2]  # the node that holds the name's partition now
        victim, survivor = nodes[running], nodes[({"a", "b"} - {running}).pop()]
        victim.send_signal(signal.SIGKILL)
        killed_at = time.time()
        victim.wait()
        assert survivor.wait(timeout=30) == 0
    finally:
        for proc in nodes.values():
            if proc.poll() is None:
                proc.kill()
    fired = _fired(log)
    counts = Counter(key for key, _, _ in fired)
    nominals = sorted(occurrence_of(key)[1] for key in counts)  # type: ignore[index]
    expected = round((nominals[-1] - nominals[0]) / 0.2) + 1
    assert len(nominals) == expected, "an occurrence is missing"
    assert sum(n - 1 for n in counts.values()) <= 1  # only one the kill interrupted
    assert all(float(at) >= occurrence_of(key)[1] for key, at, _ in fired)  # type: ignore[index]
    after = [float(at) for _, at, node in fired if node != running and float(at) > killed_at]
    assert after and nominals[-1] > killed_at + 2 * LEASE  # it went on
    # each occurrence due once the lease ran out (and was taken over) fired within a lease
    late = [
        float(at) - occurrence_of(key)[1]  # type: ignore[index]
        for key, at, _ in fired
        if occurrence_of(key)[1] > killed_at + 2 * LEASE  # type: ignore[index]
    ]
    assert late and max(late) < LEASE
