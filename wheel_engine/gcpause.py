"""Pausing the cyclic garbage collector around bulk work on the loop thread.

A bulk schedule or a recovery allocates hundreds of thousands of objects that all stay alive.
CPython's cyclic collector runs every 700 net allocations and, as the heap grows, full
collections; none of them can free anything here, and on bulk sections they were a large
share of the time (``docs/design.md``). So these sections pause the collector
and restore it after. They never await, but for the recovery in ``Engine.start()``, which awaits
its worker thread: other tasks may run meanwhile, without the cycle detector. Reference
counting still frees garbage at once; only the cycle detector waits until the section ends
(milliseconds to a second or two).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

BULK = 1000  # below this many objects a pause is not worth it


@contextmanager
def gc_paused(size: int, *, keep: bool = False) -> Iterator[None]:
    """Pause the cyclic collector for a bulk section of ``size`` items (if it was enabled).

    ``keep``: the section's objects are kept for long (a recovery's timers). Without it, the
    first allocation after the pause runs a young-generation collection that walks every
    object the section made (for a recovery, inside ``Engine.start()``), and the next
    middle-generation one walks them again, to no avail.
    With it, the survivors move straight to the oldest generation, by ``gc.freeze()`` then
    ``gc.unfreeze()`` (two list splices, O(1)), as two collections would have moved them; the
    next full collection looks at them as it would have. The process's other young objects
    move with them: cyclic garbage among those waits for the next full collection instead of
    the next young one. Skipped when the process has frozen objects of its own
    (``gc.get_freeze_count()``): those must stay frozen.
    """
    if size < BULK or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        if keep and not gc.get_freeze_count():
            gc.freeze()
            gc.unfreeze()
        gc.enable()
