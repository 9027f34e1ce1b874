"""Recovery's placement pass (``place_recovered``) against a reference model: every recovered
timer ends up in exactly one of the wheel, parked, dead and finished, by its state and whether
its handler is registered, in the order of the timers given."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from wheel_engine.handlers import HandlerSpec, make_spec
from wheel_engine.model import TimerState
from wheel_engine.restoring import place_recovered
from wheel_engine.retry import RetryPolicy
from wheel_engine.timer import Timer
from wheel_engine.wheel import TimingWheel
from wheel_engine.wheel.entry import DETACHED

TICK = 0.001
NOW = 1_000.0
#: Shared name objects, as recovery makes them (the fold interns each handler's name).
NAMES = ("a", "b", "c")
#: The states recovery hands over: it has turned every RUNNING timer back into PENDING.
STATES = [s for s in TimerState if s is not TimerState.RUNNING]


def _spec(name: str) -> HandlerSpec:
    return make_spec(name, lambda firing: None, timeout=None, retry=RetryPolicy(), thread=False)


@given(
    st.lists(st.tuples(st.sampled_from(NAMES), st.sampled_from(STATES)), max_size=40),
    st.sets(st.sampled_from(NAMES)),
)
def test_each_recovered_timer_is_placed_by_its_state_and_handler(
    rows: list[tuple[str, TimerState]], registered: set[str]
) -> None:
    handlers = {name: _spec(name) for name in registered}
    timers = {
        f"k{i}": Timer(f"k{i}", 1, name, NOW + i, None, state)
        for i, (name, state) in enumerate(rows)
    }
    wheel: TimingWheel[Timer] = TimingWheel(math.floor(NOW / TICK))

    placed = place_recovered(timers, handlers, TICK, wheel)

    pending = [t for t in timers.values() if t.state is TimerState.PENDING]
    in_wheel = [t for t in pending if t.handler in registered]
    assert placed.parked == [t for t in pending if t.handler not in registered]
    assert placed.dead == [t for t in timers.values() if t.state is TimerState.DEAD]
    assert placed.finished == [
        t for t in timers.values() if t.state in (TimerState.SUCCEEDED, TimerState.CANCELED)
    ]
    assert placed.in_wheel == len(in_wheel) == len(wheel)
    for timer in timers.values():
        assert (timer.where != DETACHED) == (timer in in_wheel)
    for timer in in_wheel:
        assert timer.tick == math.ceil(timer.due / TICK)  # never before its due
