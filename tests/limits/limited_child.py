"""A process that a test SIGKILLs while a limited handler's timers wait (test_limits_crash).

Schedules ``COUNT`` timers of a handler limited to one start a second, all due now; the first
one's handler prints ``fired`` and hangs, the others wait for a token, uncharged.
"""

from __future__ import annotations

import asyncio
import sys

from wheel_engine import Engine, Firing

COUNT = 50


async def main(path: str) -> None:
    engine = Engine(path)

    @engine.handler("limited", rate=1, concurrency=1)
    async def limited(firing: Firing) -> None:
        print("fired", firing.key, flush=True)
        await asyncio.sleep(3600)

    async with engine:
        await engine.schedule_many(
            [{"handler": "limited", "delay": 0, "key": f"k{i:02d}"} for i in range(COUNT)]
        )
        await asyncio.sleep(3600)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
