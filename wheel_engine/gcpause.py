"""Pausing the cyclic garbage collector around bulk work on the loop thread.

A bulk schedule or a recovery allocates hundreds of thousands of objects that all stay alive.
CPython's cyclic collector runs every 700 net allocations and, as the heap grows, full
collections; none of them can free anything here, and measured on 100,000-timer
``schedule_many`` calls they were about 45% of the time. So these sections pause the collector
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
def gc_paused(size: int) -> Iterator[None]:
    """Pause the cyclic collector for a bulk section of ``size`` items (if it was enabled)."""
    if size < BULK or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
