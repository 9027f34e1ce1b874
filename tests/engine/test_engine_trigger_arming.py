"""After every schedule the clock is armed no later than the earliest time the trigger must run
(``Trigger._earliest_due``: the wheel's next tick, or its next staging tick when that comes
first). A schedule whose timer is due after the armed callback may still occupy an empty upper
slot whose staging comes before it (``TimingWheel.work_moves``); before, such a schedule did
not re-arm, and the slot was crossed unstaged: figure 10 measured that as a stall of its
cascade at the crossing.
"""

from __future__ import annotations

import asyncio

from hypothesis import example, given, settings
from hypothesis import strategies as st

from wheel_engine import Engine
from wheel_engine.testing import VirtualClock

TICK = 0.001
START = 1_767_225_600.0

#: (seconds the clock advances first, seconds ahead the timer is due): upper slots of the
#: 1 ms wheel are 64 ms, 4.1 s and 262 s wide, so these reach levels 0 to 2.
_steps = st.lists(
    st.tuples(
        st.sampled_from([0.0, 0.05, 1.0, 4.0]),
        st.floats(min_value=0.0, max_value=300.0, allow_nan=False),
    ),
    min_size=1,
    max_size=12,
)


async def _armed_in_time(steps: list[tuple[float, float]]) -> None:
    clock = VirtualClock(START)
    engine = Engine(None, clock=clock, tick=TICK)
    engine.register("h", lambda firing: None)
    async with engine:
        await clock.advance(0)  # the trigger's first tick has run
        for i, (wait, ahead) in enumerate(steps):
            await clock.advance(wait)
            await engine.schedule("h", at=clock.time() + ahead, key=f"k{i}")
            wanted = engine._trigger._earliest_due()
            armed = clock.next_deadline()
            assert wanted is not None and armed is not None
            # Due already: armed for now (the trigger never asks for a time gone by).
            assert armed <= max(wanted, clock.time()), (i, armed - START, wanted - START)


@settings(max_examples=60, deadline=None)
@example([(0.0, 20.5), (0.0, 17.8)])  # the second occupies an earlier level-2 slot
@given(_steps)
def test_every_schedule_leaves_the_clock_armed_for_the_earliest_due_or_staging(
    steps: list[tuple[float, float]],
) -> None:
    asyncio.run(_armed_in_time(steps))
