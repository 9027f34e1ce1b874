"""Real processes, real SIGKILL: the guarantees hold across any number of crashes at any moment.

A worker process (``crash_worker.py``) runs an engine on a journal file, schedules and cancels
timers and logs what it knows is committed (the intent log) and every real handler start (the
fire log), both fsynced. The test (``sigkill_harness.py``) SIGKILLs it at seeded random moments,
many times, restarting it each time, then lets it drain, and checks the logs and the journal
(``sigkill_checks.py``: never early, cancel is final, at least once, versions never reused, only
real attempts counted, nothing left live). Three workloads aim the kills at different places:

- chaos: single schedules and cancels with short delays, concurrent calls, a poison timer that
  SIGKILLs its own process on every attempt (it must end DEAD after exactly max_attempts);
- queue: issue 8 item 1: 300 timers due at once behind ``max_concurrency=2``, a 50 ms handler,
  ``max_attempts=3``, kills shortly after they come due: no waiting timer may be charged;
- bulk: big ``schedule_many`` batches and compactions, kills aimed inside both.

``WHEEL_ENGINE_SOAK=1`` runs many more kills (300+ in all); ``WHEEL_ENGINE_CRASH_SEED`` picks
the seed. The figures of each run are printed (``pytest -s`` shows them).
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from sigkill_checks import check, read_journal, read_log
from sigkill_harness import Harness

SOAK = os.environ.get("WHEEL_ENGINE_SOAK") == "1"
SEED = int(os.environ.get("WHEEL_ENGINE_CRASH_SEED", "20261130"))
BOTH = ["normal", "full"]
CHAOS_KILLS = 60 if SOAK else 8
QUEUE_KILLS = 100 if SOAK else 3  # the reproduction: three kills
BULK_KILLS = 100 if SOAK else 6
QUEUE_BATCH = 300  # timers due at once
QUEUE_CONCURRENCY = 2
POISON_QUEUE_BATCH = 40  # behind the poison timer: enough to fill its start group and more
BULK_CONCURRENCY = 64  # the engine's default
AIM_TRIES = 4  # bulk: at most this many times BULK_KILLS kills to land one in each window


def harness(tmp_path: Path, durability: str, name: str, timers: int, **options: object) -> Harness:
    rng = random.Random(f"{SEED}-{name}-{durability}")
    return Harness(tmp_path, durability, rng, timers, options=dict(options))


def run_and_check(
    h: Harness,
    kill: Callable[[], None],
    done: Callable[[], bool],
    *,
    poison: bool = True,
    unstarted_per_crash: int | None = None,
) -> dict[str, object]:
    """Kill runs until ``done()``, drain (and poison), then check; returns the figures.

    ``unstarted_per_crash``: how many attempts one crash may charge without their handler
    starting (the handlers that were starting together), when the test bounds that.
    """
    started = time.monotonic()
    while not done():
        kill()
    h.finish("drain")  # no new timers: everything left fires
    if poison:
        h.finish("poison")  # alone in the engine: no other crash can hide an attempt
    rows = asyncio.run(read_journal(h.db))
    bound = None if unstarted_per_crash is None else unstarted_per_crash * h.crashes
    figures = check(
        read_log(h.intents), read_log(h.fires), rows, poison=poison, phantom_bound=bound
    )
    result = {
        "runs": h.runs,
        "kills": h.kills,
        "poison kills": h.self_kills,
        "landed": dict(h.hits),
        **figures,
        "seconds": round(time.monotonic() - started, 1),
    }
    print(f"{h.durability}: {result}", *h.log, sep="\n  ")
    return result


@pytest.mark.slow
@pytest.mark.parametrize("durability", BOTH)
def test_sigkill_at_random_moments_keeps_every_guarantee(tmp_path: Path, durability: str) -> None:
    h = harness(tmp_path, durability, "chaos", timers=200 if SOAK else 40)
    run_and_check(h, h.chaos_run, lambda: h.kills >= CHAOS_KILLS)


@pytest.mark.slow
@pytest.mark.parametrize("durability", BOTH if SOAK else ["full"])
def test_sigkill_never_charges_timers_waiting_behind_max_concurrency(
    tmp_path: Path, durability: str
) -> None:
    """Issue 8 item 1 (fixed in 03896a2): every kill charged all the waiting timers an
    attempt, so after three kills those not yet run were DEAD without their handler ever
    having started (240 of 300 in this test)."""
    h = harness(
        tmp_path,
        durability,
        "queue",
        timers=0,
        batch=QUEUE_BATCH,
        lead=0.3,
        max_concurrency=QUEUE_CONCURRENCY,
    )
    run_and_check(
        h,
        h.queue_run,
        lambda: h.kills >= QUEUE_KILLS,
        poison=SOAK,
        unstarted_per_crash=QUEUE_CONCURRENCY,
    )
    assert h.hits["queued"], f"no kill landed while timers were waiting: {h.log}"


@pytest.mark.slow
def test_sigkill_a_poison_timer_takes_no_queued_timer_down_with_it(tmp_path: Path) -> None:
    """A poison timer at the head of a backlog: each of its attempts kills the process. Only it
    may end DEAD; the timers that start with it (or wait behind it) must not be charged."""
    h = harness(
        tmp_path,
        "normal",
        "queue-poison",
        timers=0,
        batch=POISON_QUEUE_BATCH,
        lead=0.3,
        max_concurrency=QUEUE_CONCURRENCY,
        poison=True,
    )
    done = lambda: h.self_kills >= 3 and h.kills >= 1  # noqa: E731
    run_and_check(h, h.queue_run, done, poison=False, unstarted_per_crash=QUEUE_CONCURRENCY)


@pytest.mark.slow
@pytest.mark.parametrize("durability", BOTH if SOAK else ["normal"])
def test_sigkill_inside_schedule_many_and_compaction(tmp_path: Path, durability: str) -> None:
    """Kills aimed inside big schedule_many batches and compactions (and anywhere): a cut
    batch is all or nothing, a cut compaction loses nothing."""
    h = harness(
        tmp_path,
        durability,
        "bulk",
        timers=2000 if SOAK else 3000,
        batch=1000 if SOAK else 1500,
        compact_min_records=20_000,  # the explicit compactions fold big tails: wide windows
        max_concurrency=BULK_CONCURRENCY,
    )

    def done() -> bool:
        aimed = h.hits["schedule_many"] and h.hits["compaction"]
        return h.kills >= BULK_KILLS * (1 if aimed else AIM_TRIES)

    run_and_check(h, h.bulk_run, done, poison=SOAK, unstarted_per_crash=BULK_CONCURRENCY)
    assert h.hits["schedule_many"] and h.hits["compaction"], f"windows missed: {h.log}"
