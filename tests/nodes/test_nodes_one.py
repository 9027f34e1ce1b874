"""One engine on PostgreSQL: the same public API as on SQLite, through the database."""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from node_support import Slow, db_now, engine, sql, state_of, until

from wheel_engine import (
    CancelResult,
    DuplicateKey,
    Engine,
    EngineError,
    Firing,
    JournalError,
    PermanentError,
    RetryPolicy,
    TimerState,
)
from wheel_engine.clock import Cancellable, SystemClock


async def test_a_timer_is_scheduled_and_fires_through_the_database(pg_url: str) -> None:
    fired: list[tuple[str, float]] = []
    e = engine(pg_url, "a")

    @e.handler("h")
    async def h(firing: Firing) -> None:
        fired.append((firing.key, time.time()))

    async with e:
        info = await e.schedule("h", delay=0.2, key="k1", payload={"n": 1})
        assert info.state is TimerState.PENDING and info.payload == {"n": 1}
        await until(lambda: bool(fired))
        assert fired[0][0] == "k1" and fired[0][1] >= info.due
        await until(lambda: state_of(pg_url, "k1") == "SUCCEEDED")
        looked = await e.lookup("k1")
        assert looked is not None and looked.state is TimerState.SUCCEEDED
        assert looked.attempts == 1 and looked.version == info.version
        assert looked.payload == {"n": 1}
        assert await e.lookup("nothing") is None
        stats = e.stats()
        assert stats["node"] == "a" and len(stats["partitions"]) == 64
    # close() released every partition at once (the next node need not wait for a lease).
    assert sql(pg_url, "SELECT count(*) FROM wheel_partitions WHERE owner IS NOT NULL") == [(0,)]


async def test_retries_dead_letters_and_redrive_go_through_the_database(pg_url: str) -> None:
    e = engine(pg_url, "a", default_retry=RetryPolicy(max_attempts=2, initial=0.05, jitter=False))
    calls: list[tuple[str, int]] = []

    @e.handler("flaky")
    async def flaky(firing: Firing) -> None:
        calls.append((firing.key, firing.attempt))
        raise RuntimeError(f"boom {firing.attempt}")

    @e.handler("poison")
    async def poison(firing: Firing) -> None:
        raise PermanentError("never")

    async with e:
        first = await e.schedule("flaky", delay=0, key="f")
        await e.schedule("poison", delay=0, key="p")
        await until(lambda: state_of(pg_url, "f") == "DEAD" and state_of(pg_url, "p") == "DEAD")
        assert calls == [("f", 1), ("f", 2)]
        dead = await e.lookup("f")
        assert dead is not None and dead.attempts == 2 and dead.last_error == "RuntimeError: boom 2"
        poisoned = await e.lookup("p")
        assert poisoned is not None and poisoned.attempts == 1
        redriven = await e.redrive("f")
        assert redriven.state is TimerState.PENDING and redriven.version > first.version
        await until(lambda: len(calls) == 4)
        assert calls[2:] == [("f", 1), ("f", 2)]
        await until(lambda: state_of(pg_url, "f") == "DEAD")
        with pytest.raises(KeyError):
            await e.redrive("missing")
        await e.schedule("flaky", delay=600, key="later")
        with pytest.raises(EngineError, match="not DEAD"):
            await e.redrive("later")


async def test_cancel_of_pending_and_running_timers_and_a_stale_version(pg_url: str) -> None:
    e = engine(pg_url, "a")
    slow = Slow()
    e.register("slow", slow)
    async with e:
        pending = await e.schedule("slow", delay=30, key="p")  # within the horizon: held here
        assert await e.cancel("p", version=pending.version + 1000) is CancelResult.NOT_FOUND
        assert state_of(pg_url, "p") == "PENDING"
        assert await e.cancel("p", version=pending.version) is CancelResult.CANCELED
        assert state_of(pg_url, "p") == "CANCELED"
        held = e.get("p")
        assert held is not None and held.state is TimerState.CANCELED
        assert await e.cancel("p") is CancelResult.ALREADY_DONE
        assert await e.cancel("nothing") is CancelResult.NOT_FOUND
        await e.schedule("slow", delay=0, key="r")
        await asyncio.wait_for(slow.started.wait(), 10)
        assert await e.cancel("r") is CancelResult.CANCEL_REQUESTED
        await until(lambda: state_of(pg_url, "r") == "CANCELED")
        assert slow.stopped == ["r"]


async def test_on_conflict_is_decided_by_the_database(pg_url: str) -> None:
    e = engine(pg_url, "a")
    e.register("h", lambda firing: None)
    async with e:
        first = await e.schedule("h", delay=600, key="k", payload=1)
        kept = await e.schedule("h", delay=900, key="k", payload=2, on_conflict="keep")
        assert kept == first
        with pytest.raises(DuplicateKey):
            await e.schedule("h", delay=900, key="k", on_conflict="error")
        replaced = await e.schedule("h", delay=900, key="k", payload=3)
        assert replaced.version > first.version
        assert sql(pg_url, "SELECT version, due FROM wheel_timers") == [
            (replaced.version, replaced.due)
        ]
        many = await e.schedule_many([{"handler": "h", "delay": 600} for _ in range(3)])
        assert len({info.key for info in many}) == 3
        assert sorted(info.version for info in many) == [info.version for info in many]


def test_node_options_need_a_url_and_are_checked_before_anything_is_written(
    tmp_path: Path,
) -> None:
    path = tmp_path / "j.db"
    with pytest.raises(ValueError, match=r"^node needs a postgresql:// URL"):
        Engine(path, node="a")
    with pytest.raises(ValueError, match="lease, horizon need"):
        Engine(path, lease=5.0, horizon=60.0)
    assert not path.exists()
    url = "postgresql://nobody@127.0.0.1:1/none"
    with pytest.raises(ValueError, match="admin=True serves a Unix socket"):
        Engine(url, admin=True)
    for bad in ({"lease": 0}, {"lease": float("inf")}, {"horizon": -1.0}, {"node": ""}):
        with pytest.raises(ValueError):
            Engine(url, **bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Engine(url, lease="10")  # type: ignore[arg-type]
    assert Engine(url).stats()["node"] == f"{socket.gethostname()}-{os.getpid()}"


async def test_a_timer_beyond_the_horizon_is_loaded_in_time_and_fires(pg_url: str) -> None:
    fired: list[float] = []
    e = engine(pg_url, "a", horizon=0.4)  # refills every 0.1 s
    e.register("h", lambda firing: fired.append(time.time()))
    async with e:
        info = await e.schedule("h", delay=1.0, key="far")
        assert e.get("far") is None  # beyond the horizon: only the database holds it
        await until(lambda: bool(fired))
        assert fired[0] >= info.due


class _AheadClock(SystemClock):
    """A node whose wall clock runs ``ahead`` seconds fast (clock skew against the database)."""

    __slots__ = ()
    ahead = 0.5

    def time(self) -> float:
        return time.time() + self.ahead

    def call_at(self, when: float, callback: Callable[[], None]) -> Cancellable:
        return super().call_at(when - self.ahead, callback)


async def test_a_node_whose_clock_runs_ahead_never_fires_early_by_the_database(
    pg_url: str,
) -> None:
    fired: list[float] = []
    e = engine(pg_url, "fast", clock=_AheadClock())
    e.register("h", lambda firing: fired.append(time.time()))
    async with e:
        due = db_now(pg_url) + 1.0
        await e.schedule("h", at=due, key="skewed")
        await until(lambda: bool(fired))
    # This node asked half a second early; the database said "not yet" and it asked again.
    assert fired[0] >= due
    claimed_at = sql(pg_url, "SELECT first_attempt_at FROM wheel_timers WHERE key = 'skewed'")
    assert claimed_at[0][0] >= due


async def test_an_unreachable_database_fails_start_with_one_clear_error() -> None:
    e = Engine("postgresql://wheel:secret@127.0.0.1:1/timers", node="a")
    with pytest.raises(JournalError, match=r"127\.0\.0\.1:1") as caught:
        await e.start()
    assert "secret" not in str(caught.value)
    with pytest.raises(EngineError, match="not started"):
        await e.schedule("h", delay=1)


async def test_max_retained_bounds_the_finished_rows_in_the_database(pg_url: str) -> None:
    """The engine's ``max_retained`` reaches the owner's pruner: the database keeps only the
    newest finished rows (on SQLite compaction does the same to the journal)."""
    e = engine(pg_url, "a", max_retained=5)
    e.register("h", lambda firing: None)
    async with e:
        await e.schedule_many([{"handler": "h", "delay": 0, "key": f"k{n}"} for n in range(20)])
        finished = "SELECT count(*) FROM wheel_timers WHERE state = 2"
        await until(lambda: sql(pg_url, finished) == [(20,)])
        await e.compact()  # the refill loop prunes too, every quarter horizon
        assert sql(pg_url, finished) == [(5,)]
