"""SIGKILL a writing process (also mid-compaction): every acknowledged commit survives."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from journal import Journal

ROOT = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent(
    """
    import asyncio, sys
    from journal import Journal
    from journal.records import Ack, Schedule

    async def main(path):
        j = await Journal.open(path, durability="normal")
        v = 0
        while True:
            batch = []
            for _ in range(50):
                v += 1
                batch.append(Schedule(f"k{v}", v, "h", 1.0, None, 1.0))
                if v % 3 == 0:
                    batch.append(Ack(f"k{v - 1}", v - 1, 2.0))
            await j.submit(batch)
            print(v, flush=True)  # acknowledged: committed
            if v % 1000 == 0:
                compaction = asyncio.ensure_future(j.compact(retention=0.0, now=3.0))
                await asyncio.sleep(0)
                if v % 2000 == 0:
                    await compaction

    asyncio.run(main(sys.argv[1]))
    """
)


@pytest.mark.slow
@pytest.mark.parametrize("kill_after", [1_500, 4_000])
async def test_sigkill_loses_no_acknowledged_record(db: str, kill_after: int) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, db], stdout=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdout is not None
    acked = 0
    deadline = time.monotonic() + 60
    try:
        for line in proc.stdout:
            acked = int(line)
            if acked >= kill_after or time.monotonic() > deadline:
                break
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
    assert acked >= kill_after
    ro = await Journal.open(db, readonly=True)  # a reader first: it sees the WAL as left
    seen = await ro.recover()
    await ro.close()
    j = await Journal.open(db)  # the lock died with the process
    rec = await j.recover()
    assert rec.max_version >= acked
    for v in range(1, acked + 1):
        row = rec.timers.get(f"k{v}")
        if row is None:  # only finished timers may have been dropped by compaction
            assert v % 3 == 2, v
            continue
        assert row.version == v
        if v % 3 == 2:
            assert row.state == "SUCCEEDED"
    assert seen.timers == rec.timers
    report = await j.check()
    assert report.ok, report.problems
    await j.close()
