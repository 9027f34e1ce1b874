"""Schedule and fire, for instruction counts: one workload, run once, under callgrind.

Run it with ``--timers 20000`` and with ``--timers 0`` (the engine, the interpreter and the
imports alone) and divide the difference of the two totals by 20,000::

    PYTHONHASHSEED=0 PYTHONPATH=<tree> valgrind --tool=callgrind python
        bench/fire_micro.py sqlite --timers 20000

(one command, on one line; ``--callgrind-out-file=`` to name the output, whose ``summary:``
line is the total). Every timer is scheduled with ``schedule_many`` in batches of 1,000, all
due at the same instant a second ahead, and fired on a :class:`~wheel_engine.testing.
VirtualClock`, so the count does not depend on how fast the machine is. The run ends once
every attempt succeeded (on SQLite: its ack committed) and the engine closed.

- ``plain``: in memory, a plain handler (the inline runner);
- ``async``: in memory, an ``async def`` handler that never awaits (the worker tasks);
- ``sqlite``: a SQLite journal at ``durability="normal"``, a plain handler (committed groups).
  ``--no-compaction`` holds the journal's automatic compaction off (``compact_min_records``
  out of reach), to count the firing path alone: a compaction otherwise runs during the run
  and in ``close()``, and its cost grows with its pieces (``docs/design.md``).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path

from wheel_engine import Engine, Firing
from wheel_engine.testing import VirtualClock

START = 1_767_225_600.0
BATCH = 1_000
#: compact_min_records beyond any run's records: no automatic compaction.
NO_COMPACTION = 10**12


async def run(workload: str, timers: int, compaction: bool) -> None:
    clock = VirtualClock(START)
    with tempfile.TemporaryDirectory() as tmp:
        options: dict[str, object] = {"clock": clock, "tick": 0.001}
        path = None
        if workload == "sqlite":
            path = str(Path(tmp) / "fire.db")
            options["durability"] = "normal"
            if not compaction:
                options["compact_min_records"] = NO_COMPACTION
        engine = Engine(path, **options)  # type: ignore[arg-type]

        def plain(firing: Firing) -> None:
            pass

        async def coroutine(firing: Firing) -> None:
            pass

        engine.register("h", coroutine if workload == "async" else plain)
        async with engine:
            due = START + 1.0
            for first in range(0, timers, BATCH):
                count = min(BATCH, timers - first)
                await engine.schedule_many([{"handler": "h", "at": due} for _ in range(count)])
            await clock.advance(1.0)
            while engine.stats().get("succeeded", 0) < timers:
                await clock.advance(0.001)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workload", choices=("plain", "async", "sqlite"))
    parser.add_argument("--timers", type=int, default=20_000)
    parser.add_argument("--no-compaction", action="store_true")
    args = parser.parse_args()
    asyncio.run(run(args.workload, args.timers, not args.no_compaction))


if __name__ == "__main__":
    main()
