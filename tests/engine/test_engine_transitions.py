"""A timer's state machine (``Timer``'s transitions): every (state, transition) pair, random
sequences against a reference model written here, and a real engine run with the guards on."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wheel_engine import CancelResult, Engine, Firing, RetryPolicy, TimerState
from wheel_engine.errors import IllegalTransition, WheelEngineError
from wheel_engine.testing import VirtualClock
from wheel_engine.timer import Timer
from wheel_engine.timers import TimerTable
from wheel_engine.wheel.entry import DETACHED

P, R, S, C, D = (
    TimerState.PENDING,
    TimerState.RUNNING,
    TimerState.SUCCEEDED,
    TimerState.CANCELED,
    TimerState.DEAD,
)
NOW = 1_000.0
SECRET = "card 4111-1111"  # a payload: no error message may carry it

#: The reference: transition -> {state it is legal from: state it leads to}. Written from the
#: contract (a finished timer never fires again; only a running attempt can end), not copied.
LEGAL: dict[str, dict[TimerState, TimerState]] = {
    "charge": {P: R},
    "uncharge": {R: P},
    "retry": {R: P},
    "succeed": {R: S},
    "cancel": {P: C, R: C},
    "kill": {P: D, R: D},
    "void": {P: C, R: C, S: C, C: C, D: C},
    "uncancel": {C: P},  # but not from a voided timer: void is final (Reference.voided)
}

#: How each transition is called (the arguments are what its callers pass).
CALLS: dict[str, Callable[[Timer], None]] = {
    "charge": lambda t: t.charge(NOW + 1),
    "uncharge": lambda t: t.uncharge(),
    "retry": lambda t: t.retry(NOW + 30, NOW + 2),
    "succeed": lambda t: t.succeed(NOW + 3),
    "cancel": lambda t: t.cancel(NOW + 4),
    "kill": lambda t: t.kill(NOW + 5),
    "void": lambda t: t.void(),
    "uncancel": lambda t: t.uncancel(),
}
FIELDS = ("state", "attempts", "due", "updated_at", "first_attempt_at", "where", "interrupt")


def timer_in(state: TimerState) -> Timer:
    attempts = 1 if state is not P else 0  # a timer past PENDING has been charged once
    return Timer("order:A1", 3, "h", NOW + 10, SECRET, state, attempts, None, None, NOW)


def fields(timer: Timer) -> tuple[Any, ...]:
    return tuple(getattr(timer, name) for name in FIELDS)


def test_the_reference_covers_every_state_and_transition() -> None:
    assert set(LEGAL) == set(CALLS)
    assert {state for legal in LEGAL.values() for state in legal} == set(TimerState)


@pytest.mark.parametrize("transition", sorted(LEGAL))
@pytest.mark.parametrize("state", list(TimerState))
def test_every_state_and_transition_pair(state: TimerState, transition: str) -> None:
    timer = timer_in(state)
    before = fields(timer)
    target = LEGAL[transition].get(state)
    if target is None:
        with pytest.raises(IllegalTransition) as caught:
            CALLS[transition](timer)
        assert fields(timer) == before  # nothing changed
        message = str(caught.value)
        assert transition in message and state.value in message and "order:A1" in message
        assert SECRET not in message
        assert caught.value.from_state == state.value and caught.value.transition == transition
        assert isinstance(caught.value, WheelEngineError)
        return
    CALLS[transition](timer)
    assert timer.state is target
    assert timer.attempts == before[1] + {"charge": 1, "uncharge": -1}.get(transition, 0)


def test_each_transition_sets_what_its_callers_rely_on() -> None:
    timer = timer_in(P)
    timer.interrupt = "crash"
    timer.charge(NOW + 1)  # out of any index, the crash mark done, the retry clock started
    assert timer.where == DETACHED and timer.interrupt is None
    assert timer.first_attempt_at == NOW + 1
    timer.retry(NOW + 30, NOW + 2)
    assert (timer.due, timer.updated_at, timer.attempts) == (NOW + 30, NOW + 2, 1)
    timer.charge(NOW + 30)
    assert timer.first_attempt_at == NOW + 1  # attempt 2 keeps attempt 1's clock
    timer.succeed(NOW + 31)
    assert timer.updated_at == NOW + 31


def test_an_uncharged_first_attempt_leaves_no_retry_clock() -> None:
    """An attempt whose commit failed (or that the store did not claim) never happened for the
    journal: a restarted engine counts the total deadline from the first committed attempt, so
    the timer in memory must too. The second attempt's uncharge keeps the first's clock."""
    timer = timer_in(P)
    timer.charge(NOW + 1)
    timer.uncharge()
    assert (timer.attempts, timer.first_attempt_at) == (0, None)
    timer.charge(NOW + 5)
    assert timer.first_attempt_at == NOW + 5
    timer.retry(NOW + 30, NOW + 6)
    timer.charge(NOW + 30)
    timer.uncharge()
    assert (timer.attempts, timer.first_attempt_at) == (1, NOW + 5)


def test_the_table_finishes_through_the_timers_own_guard() -> None:
    table = TimerTable({}, tick=0.001, retention=60.0, max_retained=10)
    done = timer_in(R)
    table.timers[done.key] = done
    table.finish(done, S, NOW)
    with pytest.raises(IllegalTransition):
        table.finish(done, D, NOW + 1)  # a finished timer does not die
    assert done.state is S and done.updated_at == NOW and not table.dead
    assert list(table.finished) == [done.key] and len(table.finished) == 1  # still counted once
    with pytest.raises(IllegalTransition):
        table.finish(timer_in(R), P, NOW)  # PENDING is no end
    adopted = timer_in(C)  # a row built finished already: only filed
    adopted.key_base = "adopted"
    table.timers[adopted.key] = adopted
    table.finish(adopted, C, NOW + 7)
    assert adopted.updated_at == NOW + 7 and list(table.finished) == [done.key, "adopted"]


class Reference:
    """The model the random sequences are checked against: the state and the attempt count."""

    def __init__(self) -> None:
        self.state = P
        self.attempts = 0
        self.voided = False  # its version never existed durably: nothing brings it back

    def step(self, transition: str) -> bool:
        """Apply ``transition``; False (nothing changed) if it is illegal here."""
        target = LEGAL[transition].get(self.state)
        if target is None or (self.voided and transition == "uncancel"):
            return False
        self.voided = self.voided or transition == "void"
        self.attempts += {"charge": 1, "uncharge": -1}.get(transition, 0)
        self.state = target
        return True


@given(st.lists(st.sampled_from(sorted(LEGAL)), max_size=40))
def test_random_sequences_follow_the_reference(transitions: list[str]) -> None:
    timer = timer_in(P)
    model = Reference()
    for transition in transitions:
        before = fields(timer)
        legal = model.step(transition)
        if legal:
            CALLS[transition](timer)
        else:
            with pytest.raises(IllegalTransition):
                CALLS[transition](timer)
            assert fields(timer) == before
        assert (timer.state, timer.attempts) == (model.state, model.attempts)
        assert timer.attempts >= 0


@pytest.mark.parametrize("durable", [False, True], ids=["in-memory", "sqlite"])
async def test_an_engine_run_goes_through_the_guarded_transitions(
    durable: bool, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Schedule, fire (inline and on workers), retry to DEAD, redrive, cancel pending and
    running: every step goes through a guard, and none raises (a guard that raised in a loop
    callback would be reported to the loop's exception handler, and the states would differ)."""
    clock = VirtualClock()
    engine = Engine(str(tmp_path / "t.db") if durable else None, clock=clock)
    errors: list[dict[str, Any]] = []
    release = asyncio.Event()
    started: list[str] = []

    @engine.handler("ok")
    def ok(firing: Firing) -> None:
        started.append(firing.key)

    @engine.handler("flaky", retry=RetryPolicy(max_attempts=3, initial=1.0, jitter=False))
    def flaky(firing: Firing) -> None:
        raise RuntimeError("down")

    @engine.handler("blocked")
    async def blocked(firing: Firing) -> None:
        started.append(firing.key)
        await release.wait()

    asyncio.get_running_loop().set_exception_handler(lambda loop, context: errors.append(context))
    with caplog.at_level(logging.WARNING):
        async with engine:
            await engine.schedule("ok", delay=1, key="ok")
            await engine.schedule("flaky", delay=1, key="flaky")
            await engine.schedule("blocked", delay=1, key="running")
            await engine.schedule("ok", delay=60, key="later")
            await clock.advance(10)
            assert sorted(started) == ["ok", "running"]
            assert await engine.cancel("later") is CancelResult.CANCELED
            assert await engine.cancel("running") is CancelResult.CANCEL_REQUESTED
            await clock.advance(1)
            dead = engine.get("flaky")
            assert dead is not None and dead.state is D and dead.attempts == 3
            redriven = await engine.redrive("flaky")
            assert redriven.state is P and redriven.version > dead.version
            await clock.advance(10)
            states = {key: engine.get(key) for key in ("ok", "flaky", "running", "later")}
    assert {key: info.state for key, info in states.items() if info is not None} == {
        "ok": S,
        "flaky": D,
        "running": C,
        "later": C,
    }
    assert not errors
    assert "IllegalTransition" not in caplog.text
