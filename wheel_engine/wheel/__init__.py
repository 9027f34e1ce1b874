"""A pure, synchronous hierarchical hashed timing wheel (no asyncio, no I/O, stdlib only).

``TimingWheel`` holds items keyed by an absolute integer tick in levels of 64 slots, with an
overflow heap beyond the top level's horizon; ``WheelEntry`` is the handle ``insert`` returns and
``remove`` takes. One module per concept: ``slots`` (the slot arithmetic), ``entry``, ``level``,
``overflow``, ``staging`` (staged cascades), ``wheel`` (the core) and ``invariants`` (the tests'
check). See ``docs/design.md (part 2)``.
"""

from .entry import WheelEntry
from .wheel import TimingWheel

__all__ = ["TimingWheel", "WheelEntry"]
