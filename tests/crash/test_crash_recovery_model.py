"""A hypothesis state machine: schedule / cancel / advance time / stall commits / crash / recover,
on a durable engine and a virtual clock, compared with a model of what callers were told.

A crash is simulated in-process (``crash_support.crash``): the engine is abandoned without
``close()``, whatever was not committed is dropped, its lock released. To crash with work not
yet committed, the ``stall`` rule first freezes the journal's writer (``freeze_writer``): from
then on nothing is committed, so calls that wait for a commit do not return, and handlers whose
attempt is not committed do not run, until ``unstall`` (or a crash) - which makes every crash
point deterministic.

Checked after every step: a firing is never before its due; a version whose cancel returned
``CANCELED`` never fires afterwards; each new schedule gets a version above every version
committed before (across crashes and compactions); ``keep``/``error``/stale cancels behave.
Checked at each recovery: the recovered timers are exactly the committed state at the crash
(same keys, versions, dues, payloads, attempts, errors; RUNNING comes back PENDING), nothing
more; overdue timers then fire at once, in (due, version) order. Checked at the end: every
committed, uncancelled timer fired at least once, and every timer finished as it may.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import msgpack
from crash_support import crash, freeze_writer
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
)

from journal import Journal
from wheel_engine import (
    CancelResult,
    DuplicateKey,
    Engine,
    Firing,
    RetryPolicy,
    TimerInfo,
    TimerState,
)
from wheel_engine.testing import VirtualClock

SOAK = os.environ.get("WHEEL_ENGINE_SOAK") == "1"
KEYS = ("a", "b", "c", "d")
TICK = 0.001
POLICIES = {
    "ok": RetryPolicy(max_attempts=4, initial=1.0, multiplier=1.0, jitter=False),
    "fail": RetryPolicy(max_attempts=3, initial=1.0, multiplier=1.0, jitter=False),
    "slow": RetryPolicy(max_attempts=4, initial=1.0, multiplier=1.0, jitter=False),
}
SLOW = 5.0  # seconds the "slow" handler runs (virtual)
STEP_TIMEOUT = 30.0  # real seconds: every step is instant on the virtual clock
RETENTION = 1e9  # finished timers stay readable for the whole test

Row = tuple[int, str, float, Any, str, int, str | None]


def row_of(info: TimerInfo) -> Row:
    """What must survive a crash. A RUNNING timer comes back PENDING, its attempts kept."""
    state = TimerState.PENDING if info.state is TimerState.RUNNING else info.state
    return (
        info.version,
        info.handler,
        info.due,
        info.payload,
        state.value,
        info.attempts,
        info.last_error,
    )


class CrashRecoveryMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.dir = Path(tempfile.mkdtemp(prefix="wheel-engine-crash-"))
        self.path = self.dir / "timers.db"
        self.clock = VirtualClock()
        self.fired: list[Firing] = []
        self.checked = 0  # firings already checked by the invariants
        self.generation = 0
        # The model: what callers were told (only what was committed).
        self.latest: dict[str, int] = {}  # key -> latest committed version
        self.due: dict[tuple[str, int], float] = {}  # (key, version) -> committed due
        self.canceled: dict[tuple[str, int], int] = {}  # CANCELED -> len(fired) at the call
        self.cancel_requested: set[tuple[str, int]] = set()
        self.max_version = 0  # highest committed version ever
        # Stalled commits: the committed state at the stall, and calls waiting for a commit.
        self.thaw: Any = None
        self.expected: dict[str, Row] | None = None
        # (kind, key, version cancelled or kept (else 0), len(fired) at the call, task)
        self.waiting: list[tuple[str, str, int, int, asyncio.Task[Any]]] = []
        self.engine: Any = self.run(self.start())

    # ------------------------------------------------------------------ plumbing
    def run(self, coro: Any) -> Any:
        """Run one step on the example's loop; a step that hangs fails instead (no real waits)."""
        return self.loop.run_until_complete(asyncio.wait_for(coro, STEP_TIMEOUT))

    async def start(self) -> Engine:
        engine = Engine(
            self.path, clock=self.clock, durability="normal", tick=TICK, retention=RETENTION
        )
        fired = self.fired
        clock = self.clock

        async def ok(firing: Firing) -> None:
            fired.append(firing)

        async def fail(firing: Firing) -> None:
            fired.append(firing)
            raise RuntimeError("always fails")

        async def slow(firing: Firing) -> None:
            fired.append(firing)
            await clock.sleep(SLOW)

        for name, fn in (("ok", ok), ("fail", fail), ("slow", slow)):
            engine.register(name, fn, retry=POLICIES[name])
        await engine.start()
        return engine

    def snapshot(self) -> dict[str, Row]:
        return {info.key: row_of(info) for info in self.engine.timers()}

    def settle(self) -> None:
        self.run(self.clock.settle())

    # ------------------------------------------------------------------ rules
    @rule(
        key=st.sampled_from(KEYS),
        handler=st.sampled_from(["ok", "ok", "fail", "slow", "slow"]),
        when=st.one_of(
            st.tuples(st.just("delay"), st.sampled_from([0.0, 0.0005, 0.5, 1.0, 2.5, 7.0])),
            st.tuples(st.just("ago"), st.sampled_from([0.0, 3.0, 100.0])),
        ),
        on_conflict=st.sampled_from(["replace", "replace", "keep", "error"]),
        payload=st.integers(0, 9),
    )
    def schedule(
        self, key: str, handler: str, when: tuple[str, float], on_conflict: str, payload: int
    ) -> None:
        now = self.clock.time()
        kind, seconds = when
        due = now + seconds if kind == "delay" else now - seconds
        timing = {"delay": seconds} if kind == "delay" else {"at": due}
        before = self.engine.get(key)
        live = before is not None and before.state.is_live
        task = self.loop.create_task(
            self.engine.schedule(
                handler,
                key=key,
                payload={"n": payload},
                on_conflict=on_conflict,  # type: ignore[arg-type]
                **timing,  # type: ignore[arg-type]
            )
        )
        self.settle()
        if live and on_conflict == "error":
            assert task.done() and isinstance(task.exception(), DuplicateKey), task
            event("schedule: DuplicateKey")
            return
        if live and on_conflict == "keep":
            assert before is not None
            if not task.done():  # waits for the live timer's own commit: fine
                assert self.thaw is not None, "keep waits although nothing is stalled"
                self.waiting.append(("keep", key, before.version, len(self.fired), task))
                return
            info = task.result()
            assert (info.version, info.due) == (before.version, before.due)
            assert self.latest.get(key) == info.version, (
                f"keep returned an uncommitted timer: {info}"
            )
            return
        if self.thaw is not None:
            assert not task.done(), "schedule returned before its record was committed"
            self.waiting.append(("schedule", key, 0, len(self.fired), task))
            return
        info = task.result()
        assert info.state is TimerState.PENDING and info.key == key
        assert info.due == due, (info.due, due)
        self.committed_schedule(info)

    def committed_schedule(self, info: TimerInfo) -> None:
        assert info.version > self.max_version, (
            f"version {info.version} not above {self.max_version}"
        )
        self.max_version = info.version
        self.latest[info.key] = info.version
        self.due[info.key, info.version] = info.due

    @rule(key=st.sampled_from(KEYS), which=st.sampled_from(["any", "live", "stale"]))
    def cancel(self, key: str, which: str) -> None:
        before = self.engine.get(key)
        version = None
        if before is not None and which != "any":
            version = before.version if which == "live" else before.version - 1
        mark = len(self.fired)
        task = self.loop.create_task(self.engine.cancel(key, version=version))
        self.settle()
        if before is None or (version is not None and version != before.version):
            assert task.result() is CancelResult.NOT_FOUND
            after = self.engine.get(key)
            assert (after is None and before is None) or (
                after is not None and before is not None and after.version == before.version
            ), "a stale cancel touched a newer version"
            return
        if before.state is TimerState.RUNNING:
            assert task.result() is CancelResult.CANCEL_REQUESTED
            event("cancel: CANCEL_REQUESTED")
            self.cancel_requested.add((key, before.version))
            return
        if before.state is not TimerState.PENDING:
            assert task.result() is CancelResult.ALREADY_DONE
            return
        if self.thaw is not None:
            assert not task.done(), "cancel returned before its record was committed"
            self.waiting.append(("cancel", key, before.version, mark, task))
            return
        assert task.result() is CancelResult.CANCELED
        event("cancel: CANCELED")
        self.canceled[key, before.version] = mark
        self.cancel_requested.add((key, before.version))

    @rule(seconds=st.sampled_from([0.0, 0.001, 0.5, 1.0, 3.0, 10.0]))
    def advance(self, seconds: float) -> None:
        self.run(self.clock.advance(seconds))

    @precondition(lambda self: self.thaw is None)
    @rule()
    def stall(self) -> None:
        """From now on nothing commits: the committed state is the one right now."""
        self.expected = self.snapshot()
        self.thaw = freeze_writer(self.engine)

    @precondition(lambda self: self.thaw is not None)
    @rule()
    def unstall(self) -> None:
        self.run(self.thaw())
        self.thaw, self.expected = None, None
        for kind, key, version, mark, task in self.waiting:
            assert task.done(), f"{kind} {key} still waiting after the journal caught up"
            if kind == "schedule":
                self.committed_schedule(task.result())
            elif kind == "keep":
                assert task.result().version == version and (key, version) in self.due, task
            else:
                assert task.result() is CancelResult.CANCELED
                self.canceled[key, version] = mark
                self.cancel_requested.add((key, version))
        self.waiting = []
        self.settle()

    @precondition(lambda self: self.thaw is None)
    @rule()
    def compact(self) -> None:
        self.run(self.engine.compact())

    @rule(downtime=st.sampled_from([0.0, 0.0, 2.0, 30.0]))
    def crash_and_recover(self, downtime: float) -> None:
        expected = self.expected if self.thaw is not None else self.snapshot()
        assert expected is not None
        event(f"crash: stalled={self.thaw is not None}, calls waiting={bool(self.waiting)}")
        if self.thaw is not None and self.snapshot() != expected:
            event("crash: uncommitted changes dropped")
        if any(info.state is TimerState.RUNNING for info in self.engine.timers()):
            event("crash: a handler was running")
        self.run(crash(self.engine, [task for *_, task in self.waiting]))
        self.engine = None  # gone with the "process"
        self.thaw, self.expected, self.waiting = None, None, []
        self.generation += 1
        self.clock.jump(downtime)  # the wall clock moved on while the service was down

        recovered = self.run(self.read_journal())
        differ = {
            key: (expected.get(key), recovered.get(key))
            for key in expected.keys() | recovered.keys()
            if expected.get(key) != recovered.get(key)
        }
        assert not differ, f"recovered != committed at the crash: {differ}"
        for key, version in self.latest.items():
            assert recovered[key][0] == version, (key, recovered[key], version)

        mark = len(self.fired)
        self.engine = self.run(self.start())
        self.run(self.clock.advance(0))
        self.check_overdue_fired_at_once(expected, self.fired[mark:])

    async def read_journal(self) -> dict[str, Row]:
        journal = await Journal.open(self.path, readonly=True)
        try:
            rows = (await journal.recover()).timers
        finally:
            await journal.close()
        out = {}
        for key, row in rows.items():
            info = TimerInfo(
                key,
                row.version,
                row.handler,
                row.due,
                _decode(row.payload),
                TimerState(row.state),
                row.attempts,
                row.last_error,
            )
            out[key] = row_of(info)
        return out

    def check_overdue_fired_at_once(self, expected: dict[str, Row], fired: list[Firing]) -> None:
        now = self.clock.time()
        overdue = {
            (key, row[0])
            for key, row in expected.items()
            if row[4] == "PENDING" and row[2] <= now and row[5] < POLICIES[row[1]].max_attempts
        }
        got = [(f.key, f.version) for f in fired if (f.key, f.version) in overdue]
        assert set(got) == overdue, f"overdue at recovery but not fired at once: {overdue}"
        order = [
            (math.ceil(f.due / TICK), f.version) for f in fired if (f.key, f.version) in overdue
        ]
        assert order == sorted(order), f"overdue timers fired out of (due, version) order: {fired}"
        event(f"recovery: {min(len(overdue), 3)}+ overdue timers fired at once")

    # ------------------------------------------------------------------ invariants
    @invariant()
    def firings_keep_the_rules(self) -> None:
        for i in range(self.checked, len(self.fired)):
            f = self.fired[i]
            assert f.fired_at >= f.due, f"fired early: {f}"
            scheduled = self.due.get((f.key, f.version))
            if scheduled is not None:
                assert f.fired_at >= scheduled, f"fired before its scheduled due: {f}"
            mark = self.canceled.get((f.key, f.version))
            assert mark is None or i < mark, f"fired after its cancel returned CANCELED: {f}"
        self.checked = len(self.fired)

    @invariant()
    def engine_agrees_with_the_model(self) -> None:
        if self.thaw is not None:
            return
        for key, version in self.latest.items():
            info = self.engine.get(key)
            assert info is not None and info.version == version, (key, info, version)
            if (key, version) in self.canceled:
                assert info.state is TimerState.CANCELED, info

    # ------------------------------------------------------------------ the end
    def teardown(self) -> None:
        closed = self.engine is None  # a crash_and_recover failed half-way: nothing to close
        try:
            if self.engine is not None and self.thaw is not None:
                self.unstall()
            if self.engine is not None:
                self.drain_and_check()
                self.run(self.engine.close(grace=0))
                closed = True
        finally:
            try:
                if not closed:  # a check failed: abandon the engine, whatever state it is in
                    with contextlib.suppress(Exception):
                        self.run(crash(self.engine, [task for *_, task in self.waiting]))
                self.run(self.loop.shutdown_default_executor())
            finally:
                self.loop.close()
                shutil.rmtree(self.dir, ignore_errors=True)

    def drain_and_check(self) -> None:
        for _ in range(100):
            if not any(info.state.is_live for info in self.engine.timers()):
                break
            self.run(self.clock.advance(10))
        self.firings_keep_the_rules()
        event(f"end: {min(len(self.latest), 3)}+ keys, {min(self.generation, 3)}+ crashes")
        fired = {(f.key, f.version) for f in self.fired}
        for key, version in self.latest.items():
            info = self.engine.get(key)
            assert info is not None and info.version == version
            state = info.state
            if (key, version) in self.canceled:
                assert state is TimerState.CANCELED, info
                continue
            assert not state.is_live, f"still {state} after draining: {info}"
            if state is TimerState.CANCELED:
                assert (key, version) in self.cancel_requested, f"cancelled by nobody: {info}"
            elif state is TimerState.DEAD:
                assert info.attempts == POLICIES[info.handler].max_attempts, info
                assert info.handler == "fail" or "interrupted" in str(info.last_error), info
            else:
                assert (key, version) in fired, f"committed, uncancelled, never fired: {info}"
                assert info.handler != "fail", f"a failing handler SUCCEEDED: {info}"


def _decode(data: bytes | None) -> Any:
    return None if data is None else msgpack.unpackb(data, raw=False, strict_map_key=False)


CrashRecoveryMachine.TestCase.settings = settings(
    max_examples=2000 if SOAK else 200,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestCrashRecoveryModel = CrashRecoveryMachine.TestCase
