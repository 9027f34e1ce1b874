"""The slot arithmetic of the wheel: which level and which slot a tick belongs to.

This module is the one definition of the placement rule. Two hot loops spell it out inline,
because a Python call per entry would cost them more than the arithmetic does:
``TimingWheel._place`` (every insert) and ``Level.spread`` (every cascade and staging move);
each says so where it does it, and ``invariants.check_invariants`` checks every entry they
placed against :func:`level_for` and :func:`slot_for`.

Placement is by XOR, as in tokio's ``runtime/time/wheel``: relative to a cursor (the wheel's
``elapsed``, the first tick not yet handed out, or the start of a slot being staged), a tick
lives in the level of the highest bit in which it differs from the cursor. Worked example with
``elapsed = 4096 + 70`` (binary ``1 000001 000110``):

=======  ====================  ==================  =====  =====================
tick     ``tick ^ elapsed``    highest bit set     level  slot
=======  ====================  ==================  =====  =====================
4166     0                     none (``| 63``: 5)  0      ``4166 & 63 = 6``
4180     ``010010``            4                   0      ``4180 & 63 = 20``
4300     ``10 101010``         7                   1      ``(4300 >> 6) & 63 = 3``
12288    ``10 000001 000110``  13                  2      ``(12288 >> 12) & 63 = 3``
=======  ====================  ==================  =====  =====================
"""

from __future__ import annotations

from typing import Final

#: Bits of the tick that one level consumes: a level has ``1 << SLOT_BITS`` (64) slots.
#: (These three are ``Final`` so that compiled code inlines them instead of looking each up
#: in the module's globals on every insert.)
SLOT_BITS: Final = 6
#: Slots per level; a level's occupancy bitmap is an int of this many bits.
SLOTS: Final = 1 << SLOT_BITS
#: The low ``SLOT_BITS`` bits set: ``x & SLOT_MASK`` is a slot index, ``x | SLOT_MASK`` floors
#: a bit length at ``SLOT_BITS`` so that ticks differing only in those bits are level 0.
SLOT_MASK: Final = SLOTS - 1


def level_for(elapsed: int, tick: int) -> int:
    """The level of ``tick`` relative to the cursor ``elapsed`` (``tick >= elapsed``).

    The index of the highest bit in which the two differ, divided by ``SLOT_BITS``; ``| SLOT_MASK``
    makes a tick that differs only in the low bits (or not at all) level 0. A result of the
    wheel's level count or more means the overflow heap.
    """
    return (((tick ^ elapsed) | SLOT_MASK).bit_length() - 1) // SLOT_BITS


def slot_for(tick: int, level: int) -> int:
    """The slot of ``tick`` in ``level``: its ``SLOT_BITS`` bits for that level."""
    return (tick >> (level * SLOT_BITS)) & SLOT_MASK


def lowest_slot(occupied: int) -> int:
    """The index of the lowest set bit of a non-zero occupancy bitmap.

    ``occupied & -occupied`` keeps only the lowest set bit (two's complement: ``-x`` is ``~x + 1``,
    which flips every bit above it); its bit length minus one is its index. No empty slot is
    scanned.
    """
    return (occupied & -occupied).bit_length() - 1


def slot_start(elapsed: int, level: int, slot: int) -> int:
    """The first tick of ``slot`` of ``level`` in the block of the cursor ``elapsed``.

    The block is the run of ``SLOTS`` slots whose ticks agree with ``elapsed`` above that level:
    keep ``elapsed``'s bits above the level, put ``slot`` in the level's bits, zero the rest.
    """
    shift = level * SLOT_BITS
    up = shift + SLOT_BITS
    return ((elapsed >> up) << up) | (slot << shift)
