"""The timer table's index by key: a dict for the keys callers name, a dense array for the keys
this engine makes.

Most timers are scheduled without a key, and the engine names them ``"<prefix>-<serial>"``
(:class:`~wheel_engine.engine_keys.EngineKeys`). Held in a dict, each would cost its key's
string and a dict entry; held here, it costs one array cell, and the timer keeps only its
serial beside the shared prefix (``Timer.key_base``, ``Timer.serial``), spelling its key when
asked. The dict holds every other key: the callers', another engine's (recovered from a
journal), and engine-made ones moved out of the array.

**Where a key lives** depends on its spelling only, so a timer is found whichever way it was
made (a caller may schedule again with a key the engine made): a key spelled exactly as this
engine spells a serial in ``[base, next_serial)`` (``base`` the serial of the first cell) is
the array's, in cell ``serial - base``; every other key is the dict's. A key spelled for a
serial the engine has not made yet (only a caller can spell one) moves ``next_serial`` past it
and the array's timers to the dict (:meth:`_retire`), so it is the dict's for good.

**Worked example.** The prefix is ``"ab"``, the array empty at base 1. Three schedules without a
key make serials 1, 2, 3 in cells 0-2; ``get("ab-2")`` reads cell 1; ``get("ab-02")`` and
``get("order:7")`` read the dict. Timers 1 and 2 finish and are forgotten: cells 0 and 1 empty,
and the array is trimmed from the front once enough such cells lead it, its base moving up.
Were timer 3 to stay a year while millions came and went behind it, the trimming would stop at
it; so when fewer than a quarter of the cells are live the array is retired: the live timers go
to the dict under their spelled keys, and the array starts afresh at ``next_serial``. A timer
moves at most once, and a retirement follows at least three removals per timer it moves.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Final

from wheel_engine.engine_keys import EngineKeys

if TYPE_CHECKING:
    from wheel_engine.timer import Timer

#: Leading empty cells the array keeps before it is trimmed (a trim copies the cells behind).
TRIM_AT: Final = 1024
#: Below this many cells the array is never retired: small sparse arrays cost little.
RETIRE_AT: Final = 4096
#: Digits of a serial spelled in a key: more than any engine reaches, and ``int()`` stays cheap.
MAX_SERIAL_DIGITS: Final = 18


class KeyIndex:
    """Every key's current timer (see the module docstring). Guaranteed: a key maps to at most
    one timer, :meth:`get` finds what :meth:`put` stored under the same key however it is
    spelled, and the array's memory stays within four cells per live timer it holds (beyond
    its first ``retire_at`` cells)."""

    __slots__ = (
        "_base",
        "_cells",
        "_dash",
        "_head",
        "_live",
        "made",
        "named",
        "retire_at",
        "trim_at",
    )

    def __init__(self, trim_at: int = TRIM_AT, retire_at: int = RETIRE_AT) -> None:
        self.trim_at = trim_at  # the thresholds: tests make them small
        self.retire_at = retire_at
        self.made = EngineKeys()  # the keys this engine makes: see EngineKeys
        self.named: dict[str, Timer] = {}  # every key the array does not hold
        self._cells: list[Timer | None] = []  # cell i: serial base + i
        self._base = 1
        self._head = 0  # cells before it are empty
        self._live = 0  # cells not empty
        self._dash = self.made.prefix + "-"

    # ------------------------------------------------------------------ where a key lives
    def _cell(self, key: str) -> int:
        """The array cell of ``key``, or -1 if the dict holds it (-2: see :meth:`put`)."""
        dash = self._dash
        if not key.startswith(dash):
            return -1
        digits = key[len(dash) :]
        if not (0 < len(digits) <= MAX_SERIAL_DIGITS and digits.isascii() and digits.isdigit()):
            return -1
        if digits[0] == "0":  # "ab-01" is not how serial 1 is spelled: another key
            return -1
        serial = int(digits)
        if serial >= self.made.next_serial:
            return -2  # not made yet: see put
        return serial - self._base if serial >= self._base else -1

    def _timer_cell(self, timer: Timer) -> int:
        """The array cell of ``timer``'s key, or a negative number: the fast way for a timer the
        engine made, which knows its serial, and :meth:`_cell` for the others."""
        serial = timer.serial
        if serial and timer.key_base is self.made.prefix:
            cell = serial - self._base
            return cell if cell >= 0 else -1
        return self._cell(timer.key)

    # ------------------------------------------------------------------ reads
    def get(self, key: object) -> Timer | None:
        """The timer of ``key``, or None; a key that is no ``str`` names none (as a dict's
        ``get`` has it: the public reads pass their argument on unchecked)."""
        if not isinstance(key, str):
            return self.named.get(key)  # type: ignore[call-overload,no-any-return]  # None, or TypeError
        cell = self._cell(key)
        if cell < 0:
            return self.named.get(key)
        cells = self._cells
        return cells[cell] if cell < len(cells) else None

    def __getitem__(self, key: object) -> Timer:
        timer = self.get(key)
        if timer is None:
            raise KeyError(key)
        return timer

    def __contains__(self, key: object) -> bool:
        return self.get(key) is not None

    def holds(self, timer: Timer) -> bool:
        """Whether ``timer`` is its key's current timer (not replaced, not forgotten)."""
        serial = timer.serial  # _timer_cell, inline for a made timer: a call less, pure
        if serial and timer.key_base is self.made.prefix:
            cell = serial - self._base
        else:
            cell = self._timer_cell(timer)
        if cell < 0:
            return self.named.get(timer.key) is timer
        cells = self._cells
        return cell < len(cells) and cells[cell] is timer

    def span(self) -> int:
        """Array cells held past the head: what the array costs (tests read it)."""
        return len(self._cells) - self._head

    def live(self) -> int:
        """Timers the array holds."""
        return self._live

    def __len__(self) -> int:
        return self._live + len(self.named)

    def values(self) -> Iterator[Timer]:
        """Every current timer: the dict's, then the array's in serial order."""
        yield from self.named.values()
        cells = self._cells
        for cell in range(self._head, len(cells)):
            timer = cells[cell]
            if timer is not None:
                yield timer

    def __iter__(self) -> Iterator[str]:
        for timer in self.values():
            yield timer.key

    def items(self) -> Iterator[tuple[str, Timer]]:
        for timer in self.values():
            yield timer.key, timer

    # ------------------------------------------------------------------ writes
    def put(self, timer: Timer) -> None:
        """``timer`` is its key's current timer, in place of any other."""
        serial = timer.serial  # _timer_cell, inline for a made timer: a call less, pure
        if serial and timer.key_base is self.made.prefix:
            cell = serial - self._base
            cell = cell if cell >= 0 else -1
        else:
            cell = self._timer_cell(timer)
        if cell == -2:  # a caller spelled a serial not made yet: never make it, keep it named
            key = timer.key
            self.made.skip_to(int(key[len(self._dash) :]) + 1)
            self._retire()
            self.named[key] = timer
            return
        if cell < 0:
            self.named[timer.key] = timer
            return
        cells = self._cells
        size = len(cells)
        if cell == size:
            cells.append(timer)
        elif cell > size:
            cells.extend([None] * (cell - size))
            cells.append(timer)
        elif cells[cell] is None:
            cells[cell] = timer
        else:
            cells[cell] = timer
            return
        self._live += 1
        if cell < self._head:
            self._head = cell

    def __setitem__(self, key: str, timer: Timer) -> None:
        """As :meth:`put`: a timer is only ever stored under its own key."""
        if key != timer.key:
            raise ValueError(f"a timer is stored under its own key, not {key!r}")
        self.put(timer)

    def update(self, timers: Mapping[str, Timer]) -> None:
        """:meth:`put` each of ``timers`` (keyed by their keys), in order: restore's million at
        dict speed. A key without this engine's prefix is the dict's whatever happens around it,
        so those go in at once; the others (recovered keys were made by earlier engines, under
        other prefixes: rare) take :meth:`put`'s way, after the dict forgets what the bulk step
        or a retirement left under them."""
        named, dash = self.named, self._dash
        spelled = [(key, timer) for key, timer in timers.items() if key.startswith(dash)]
        named.update(timers)
        for key, timer in spelled:
            named.pop(key, None)
            self.put(timer)

    def delete(self, timer: Timer) -> None:
        """Forget ``timer``'s key (whichever timer it holds). KeyError if none."""
        cell = self._timer_cell(timer)
        cells = self._cells
        if cell < 0:
            del self.named[timer.key]
            return
        if cell >= len(cells) or cells[cell] is None:
            raise KeyError(timer.key)
        cells[cell] = None
        self._live -= 1
        if cell == self._head:
            self._trim()
        span = len(cells) - self._head
        if span >= self.retire_at and 4 * self._live < span:
            self._retire()

    def __delitem__(self, key: str) -> None:
        timer = self.get(key)
        if timer is None:
            raise KeyError(key)
        self.delete(timer)

    def _trim(self) -> None:
        """Step the head past the empty cells that lead; drop them once they are many."""
        cells, head, size = self._cells, self._head, len(self._cells)
        while head < size and cells[head] is None:
            head += 1
        if head >= self.trim_at and 2 * head >= size:
            del cells[:head]
            self._base += head
            head = 0
        self._head = head

    def _retire(self) -> None:
        """Move the array's timers to the dict under their spelled keys; start the array afresh
        at the next serial to be made."""
        named = self.named
        for timer in self._cells[self._head :]:
            if timer is not None:
                named[timer.key] = timer
        self._cells = []
        self._base = self.made.next_serial
        self._head = 0
        self._live = 0
