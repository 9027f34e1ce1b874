"""The retention window against a reference model: random sequences of the table's changes.

The model is a plain list of the retained keys with their finishing times, in the order they
entered, and the rules written out: a key's new version (or its leaving) takes its old entry out,
a finished version is appended, and a purge forgets from the front while the front is older than
``retention`` or more than ``max_retained`` are kept. After every step the table must agree on
what the window lists and counts, which keys it still holds (and which of them are DEAD), and
what a read sees.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from wheel_engine.handlers import HandlerSpec, make_spec
from wheel_engine.model import TimerState
from wheel_engine.retry import RetryPolicy
from wheel_engine.timer import Timer
from wheel_engine.timers import TimerTable

P, S, C, D = TimerState.PENDING, TimerState.SUCCEEDED, TimerState.CANCELED, TimerState.DEAD
START = 1_000.0
KEYS = ("a", "b", "c", "d")
OPERATIONS = (
    "succeed",  # a new version runs and succeeds
    "cancel",  # a new version is scheduled, then cancelled while pending
    "schedule",  # a new version, pending
    "die",  # a new version runs out of attempts: DEAD, kept out of the window
    "uncancel",  # the key's CANCELED version goes back to PENDING (its cancel's commit failed)
    "fail_pending",  # a new pending version's commit fails: the previous one is back
    "fail_finished",  # the same, after the new version ran and succeeded
    "adopt",  # a finished row from the database (another node) becomes the key's version
    "forget",  # the node stops holding the key
    "tick",  # time passes, the window is purged
)


@dataclass
class Version:
    """What the model knows of one version: its state and when it finished."""

    number: int
    state: TimerState
    at: float


class Window:
    """The reference: the table's keys by their latest version, and the retained keys."""

    def __init__(self, retention: float, max_retained: int) -> None:
        self.retention = retention
        self.max_retained = max_retained
        self.current: dict[str, Version] = {}
        self.retained: list[tuple[str, float]] = []  # (key, finished at), in entering order

    def leave(self, key: str) -> None:
        """``key``'s version stops being retained, if it was."""
        self.retained = [(k, at) for k, at in self.retained if k != key]

    def enter(self, key: str, at: float, now: float) -> None:
        self.retained.append((key, at))
        self.purge(now)

    def purge(self, now: float) -> None:
        while self.retained and (
            len(self.retained) > self.max_retained or self.retained[0][1] <= now - self.retention
        ):
            key, _ = self.retained.pop(0)
            del self.current[key]

    def readable(self, key: str, now: float) -> bool:
        version = self.current.get(key)
        if version is None:
            return False
        finished = version.state is S or version.state is C
        return not finished or version.at > now - self.retention


def _table(retention: float, max_retained: int) -> TimerTable:
    handlers: dict[str, HandlerSpec] = {
        "h": make_spec("h", lambda firing: None, timeout=None, retry=RetryPolicy(), thread=False)
    }
    made = TimerTable(handlers, tick=0.001, retention=retention, max_retained=max_retained)
    made.start_wheel(START)
    return made


class Run:
    """Applies each operation to the table and to the model alike."""

    def __init__(self, retention: float, max_retained: int) -> None:
        self.table = _table(retention, max_retained)
        self.model = Window(retention, max_retained)
        self.now = START
        self.versions = 0

    def _new(self, key: str) -> tuple[Timer, Timer | None]:
        """A new PENDING version of ``key`` in the table, in the wheel; and the one it replaced."""
        self.versions += 1
        timer = Timer(key, self.versions, "h", self.now + 3600.0, None, updated_at=self.now)
        previous = self.table.timers.get(key)
        if previous is not None and previous.state is P:
            self.table.unplace(previous)
        self.table.replace(timer, previous)
        self.table.place(timer)
        self.model.leave(key)
        self.model.current[key] = Version(timer.version, P, self.now)
        return timer, previous

    def _run(self, timer: Timer) -> None:
        self.table.unplace(timer)  # as the starter takes it
        timer.charge(self.now)

    def _finish(self, timer: Timer, state: TimerState) -> None:
        self.table.finish(timer, state, self.now)
        self.model.current[timer.key] = Version(timer.version, state, self.now)
        if state is D:
            return
        self.model.enter(timer.key, self.now, self.now)

    def apply(self, operation: str, key: str, elapsed: float) -> None:
        self.now += elapsed
        getattr(self, operation)(key)

    def succeed(self, key: str) -> None:
        timer, _ = self._new(key)
        self._run(timer)
        self._finish(timer, S)

    def cancel(self, key: str) -> None:
        timer, _ = self._new(key)
        self.table.unplace(timer)  # as Scheduling.cancel does
        self._finish(timer, C)

    def schedule(self, key: str) -> None:
        self._new(key)

    def die(self, key: str) -> None:
        timer, _ = self._new(key)
        self._run(timer)
        self._finish(timer, D)

    def uncancel(self, key: str) -> None:
        timer = self.table.timers.get(key)
        if timer is None or timer.state is not C:
            return
        assert self.table.uncancel(timer)
        self.model.leave(key)
        self.model.current[key].state = P

    def fail_pending(self, key: str) -> None:
        self._take_back(key, ran=False)

    def fail_finished(self, key: str) -> None:
        self._take_back(key, ran=True)

    def _take_back(self, key: str, ran: bool) -> None:
        before = self.model.current.get(key)
        timer, previous = self._new(key)
        if ran:
            self._run(timer)
            self._finish(timer, S)  # it may have run before its commit failed
        if self.table.timers.get(key) is not timer:  # forgotten at once: nothing to undo
            self.table.take_back(timer, previous, self.now)
            return
        self.table.take_back(timer, previous, self.now)
        self.model.leave(key)
        if before is None:
            del self.model.current[key]
            return
        self.model.current[key] = before
        if before.state is S or before.state is C:
            self.model.enter(key, before.at, self.now)  # back in, at the back of the window

    def adopt(self, key: str) -> None:
        local = self.table.timers.get(key)
        if local is not None and local.state is P:
            self.table.unplace(local)
        self.versions += 1
        fresh = Timer(key, self.versions, "h", self.now, None, S, 1, updated_at=self.now)
        self.table.replace(fresh, local)
        self.model.leave(key)
        self._finish(fresh, S)

    def forget(self, key: str) -> None:
        """As ``nodes.adopting.Adopter.forget`` does."""
        timer = self.table.timers.get(key)
        if timer is None:
            return
        if timer.state is P:
            self.table.unplace(timer)
        self.table.finished.discard(timer)
        del self.table.timers[key]
        self.table.dead.pop(key, None)
        self.model.leave(key)
        del self.model.current[key]

    def tick(self, key: str) -> None:
        self.table.purge_finished(self.now)
        self.model.purge(self.now)

    def check(self) -> None:
        table, model = self.table, self.model
        assert list(table.finished) == [key for key, _ in model.retained]
        assert len(table.finished) == len(model.retained)
        assert table.finished.entries() >= len(model.retained)
        assert {key: t.version for key, t in table.timers.items()} == {
            key: v.number for key, v in model.current.items()
        }
        assert {key: t.state for key, t in table.timers.items()} == {
            key: v.state for key, v in model.current.items()
        }
        assert set(table.dead) == {key for key, v in model.current.items() if v.state is D}
        for key in KEYS:
            assert (table.info(key, self.now) is not None) == model.readable(key, self.now), key
        for state in (S, C, D):
            listed = {info.key for info in table.select(state, None, self.now)}
            assert listed == {
                key
                for key, v in model.current.items()
                if v.state is state and model.readable(key, self.now)
            }


steps = st.lists(
    st.tuples(
        st.sampled_from(OPERATIONS), st.sampled_from(KEYS), st.sampled_from((0.0, 0.5, 1.0, 3.0))
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(
    retention=st.sampled_from((0.0, 2.0, 5.0, 3600.0)),
    max_retained=st.integers(min_value=1, max_value=4),
    operations=steps,
)
def test_the_window_keeps_the_reference_rules(
    retention: float, max_retained: int, operations: list[tuple[str, str, float]]
) -> None:
    run = Run(retention, max_retained)
    for operation, key, elapsed in operations:
        run.apply(operation, key, elapsed)
        run.check()


def test_adopted_finished_rows_count_toward_max_retained() -> None:
    """A finished row adopted from the database enters the window as any finished timer does,
    so the count bounds it too (it used to be counted out as it came in: never forgotten)."""
    run = Run(3600.0, 2)
    for key in KEYS:
        run.apply("adopt", key, 1.0)
        run.check()
    assert list(run.table.finished) == ["c", "d"] and len(run.table.finished) == 2
    assert sorted(run.table.timers) == ["c", "d"]
