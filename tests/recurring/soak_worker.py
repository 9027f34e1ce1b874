"""A process for the SIGKILL soak: an engine on a SQLite journal running one recurrence.

``python soak_worker.py JOURNAL LOG [SECONDS [NODE]]``: each occurrence's start is appended to
LOG (``key fired_at node``, flushed and fsynced before the handler returns), then the engine
runs until killed, or for SECONDS and closes. A ``postgresql://`` JOURNAL makes it the node
NODE, with a 1.5 s lease. With ``SOAK_KILL_AFTER_ATTEMPT=1`` in its environment (SQLite), it
SIGKILLs itself right after the first commit that holds an occurrence's attempt, before that
occurrence's handler starts.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time

from journal_view import attempted, records_of

from wheel_engine import Engine, Firing


async def main(journal: str, log: str, seconds: float | None, node: str) -> None:
    shared = journal.startswith("postgresql://")
    engine = Engine(journal, node=node, lease=1.5, horizon=60.0) if shared else Engine(journal)
    out = open(log, "a", encoding="utf-8")  # noqa: SIM115 - kept open for the process's life

    async def tick(firing: Firing) -> None:
        out.write(f"{firing.key} {time.time():.6f} {node}\n")
        out.flush()
        os.fsync(out.fileno())

    engine.register("tick", tick)
    async with engine:
        if os.environ.get("SOAK_KILL_AFTER_ATTEMPT") and engine.journal is not None:
            _kill_after_attempt(engine, journal)
        # On PostgreSQL node "a" schedules it (recurrences() lists only a node's own records).
        if (not shared or node == "a") and not await engine.recurrences():
            await engine.schedule_recurring("soak", "tick", every=0.2, catch_up="all")
        await asyncio.sleep(seconds if seconds is not None else 3600)


def _kill_after_attempt(engine: Engine, path: str) -> None:
    """SIGKILL this process right after the first commit holding an occurrence's attempt (the
    journal's hook runs before any handler of that commit starts)."""
    journal = engine.journal
    assert journal is not None
    chained = journal.after_commit

    def look() -> None:
        if attempted(records_of(path)):
            os.kill(os.getpid(), signal.SIGKILL)
        if chained is not None:
            chained()

    journal.after_commit = look


if __name__ == "__main__":
    seconds = float(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[3] != "-" else None
    asyncio.run(main(sys.argv[1], sys.argv[2], seconds, sys.argv[4] if len(sys.argv) > 4 else "a"))
