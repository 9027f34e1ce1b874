"""Recovery's placement pass: each recovered timer sorted into where it waits, in one pass.

``TimerTable.restore`` hands the timers recovery built to :func:`place_recovered`, which looks
at each one once: a PENDING timer whose handler is registered gets its tick and goes into the
wheel there and then; the others are listed for the table (parked, dead, finished). It runs
once per start-up over every timer the journal holds (a million at the benchmark's largest
size), so it is compiled (``wheel_engine/_build.py``): compiled, reading a timer's fields is a
native read instead of a descriptor call, and the insert is a direct call.

Guaranteed: a timer's tick is its due rounded up to the wheel's tick (as
``TimerTable.insert``: never before the due time); every timer is in exactly one of the
wheel and the three lists; timers keep the order of ``timers`` within each list.
"""

from __future__ import annotations

from typing import Final

from wheel_engine.handlers import HandlerSpec
from wheel_engine.model import TimerState
from wheel_engine.timer import Timer, ticked
from wheel_engine.wheel import TimingWheel

# Final: compiled, a pointer comparison with a C static, not a lookup in the module's globals
# on every timer.
PENDING: Final = TimerState.PENDING
DEAD: Final = TimerState.DEAD


class Sorted:
    """What :func:`place_recovered` did not put into the wheel, and how many it did."""

    __slots__ = ("dead", "finished", "in_wheel", "parked")

    def __init__(self) -> None:
        self.in_wheel = 0  #: PENDING timers placed in the wheel
        self.parked: list[Timer] = []  #: PENDING timers whose handler is not registered
        self.dead: list[Timer] = []  #: DEAD timers
        self.finished: list[Timer] = []  #: SUCCEEDED and CANCELED timers


def place_recovered(
    timers: dict[str, Timer],
    handlers: dict[str, HandlerSpec],
    tick: float,
    wheel: TimingWheel[Timer],
) -> Sorted:
    """Put every PENDING timer of ``timers`` whose handler is in ``handlers`` into ``wheel``
    at its due tick; return the others, sorted (see the module docstring)."""
    out = Sorted()
    parked = out.parked
    dead = out.dead
    finished = out.finished
    in_wheel = 0
    # The last handler name found registered: names are shared str objects (the fold interns
    # them), so the timers of one handler, most of a journal, skip the lookup by name.
    registered: str | None = None
    for timer in timers.values():
        state = timer.state
        if state is PENDING:
            handler = timer.handler
            if handler is registered or handler in handlers:
                registered = handler
                wheel.insert_entry(ticked(timer, tick))  # as TimerTable.insert: never before due
                in_wheel += 1
            else:
                parked.append(timer)
        elif state is DEAD:
            dead.append(timer)
        else:
            finished.append(timer)
    out.in_wheel = in_wheel
    return out
