"""What limits figure 7's growth: a dict of every pending timer by key, measured on its own.

The engine finds a timer by its key in one dict (``Scheduler._timers``), which holds every
pending timer; asyncio's ``call_at`` has no such index (the handle is the caller's only way
back to its timer). Figure 7 schedules 20,000 new timers on top of N pending and fires them;
each goes into that dict, is looked up and is removed. This script times exactly that on a
plain dict of N string keys, with nothing else::

    python -m bench.compare.key_index

It prints, for 10k, 100k, 1M and 10M pending (the sizes that fit in memory), the CPU time of
one insert, lookup and delete of a new key, and its growth over the smallest size. A dict's
slots are spread over its whole table, so at 10M each of the three is a cache and TLB miss;
at 10k the table stays in cache. The entries are frozen out of the collector's reach
(``gc.freeze()``), as figure 7 does, so what is timed is the dict alone.
"""

from __future__ import annotations

import gc
import sys
import time

from bench.compare import pending as pending_timers

SIZES = (10_000, 100_000, 1_000_000, 10_000_000)
OPERATIONS = 200_000  #: new keys put in, looked up and taken out at each size
BYTES_PER_ENTRY = 160  #: generous, for the memory check: a key string, an int, the dict's slot


def cost(pending: int, operations: int = OPERATIONS) -> float:
    """Seconds of CPU for one insert, lookup and delete of a new key, ``pending`` keys held."""
    index = {f"pending-{i}": i for i in range(pending)}
    keys = [f"new-{i}" for i in range(operations)]
    gc.collect()
    gc.freeze()
    try:
        start = time.process_time()
        for key in keys:
            index[key] = 0
        for key in keys:
            index[key]
        for key in keys:
            del index[key]
        return (time.process_time() - start) / operations
    finally:
        gc.unfreeze()


def main(argv: list[str]) -> int:
    sizes = tuple(int(a) for a in argv) or SIZES
    available = pending_timers.available()
    smallest: float | None = None
    for pending in sizes:
        if available is not None and pending * BYTES_PER_ENTRY > available:
            print(f"{pending:>12,} pending: skipped, needs about {pending * BYTES_PER_ENTRY:,} B")
            continue
        seconds = cost(pending)
        smallest = seconds if smallest is None else smallest
        print(
            f"{pending:>12,} pending: {seconds * 1e6:.3f} us per insert + lookup + delete "
            f"(+{(seconds - smallest) * 1e6:.3f} us over the smallest size)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
