"""The assertions of the SIGKILL tests, on the two fsynced logs and the final journal.

:func:`check` runs them all and returns the figures. What each one holds the engine to:

- versions are never reused (one version, one key and one due, in both logs and the journal);
- never early: nothing fired before its due by the wall clock;
- cancel is final: nothing of a version fired after its cancel returned ``CANCELED``;
- only real attempts count (guarantee 5): an attempt number starts at most once, every start
  was charged before it ran, a DEAD timer had exactly ``max_attempts`` real starts, and with a
  ``phantom_bound`` the attempts charged without a real start (cancelled timers aside) are at
  most ``max_concurrency`` per crash (the handlers starting together when it hit), not the
  whole queue;
- at least once: every committed, uncancelled timer fired (or a later version replaced it);
- a ``schedule_many`` cut by a kill is all or nothing in the journal;
- nothing is left live; each final row ended as it may.
"""

from __future__ import annotations

import json
import random
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from crash_worker import MAX_ATTEMPTS, POISON_ATTEMPTS, batch_due

from journal import Journal, TimerRow, apply

FINISHED = {"SUCCEEDED", "CANCELED", "DEAD"}
#: The chaos poison starts first thing after each recovery, where the test's kills also land:
#: a kill after its attempt committed but before its handler began is a crash of a start (it
#: is charged, by design), so only the DEAD state and its attempt count are held against it.
SHARES_ITS_START_WITH_KILLS = {"poison-chaos"}
CROSS_CHECKED = 300  # keys whose recovered row is re-folded from their own records
Line = dict[str, Any]
Version = tuple[str, int]  # (key, version)


def read_log(path: Path) -> list[Line]:
    """The JSON lines of a log, padding skipped. No line is ever torn (``crash_worker.Log``)."""
    if not path.exists():
        return []
    return parse_lines(path.read_bytes(), path.name)


def parse_lines(data: bytes, name: str) -> list[Line]:
    assert not data or data.endswith(b"\n"), f"torn last line in {name}: {data[-200:]!r}"
    lines = []
    for line in data.splitlines():
        if line.strip():
            try:
                lines.append(json.loads(line))
            except ValueError as exc:
                raise AssertionError(f"torn line in {name}: {line[:300]!r}") from exc
    return lines


async def read_journal(path: Path) -> dict[str, TimerRow]:
    """The final state by recovery, cross-checked key by key against the snapshot row plus
    the key's tail records folded with :func:`journal.apply` (the reference fold), for at most
    ``CROSS_CHECKED`` keys (a seeded sample: each key's history is a scan of the tail)."""
    journal = await Journal.open(path, readonly=True)
    try:
        rows = (await journal.recover()).timers
        keys = sorted(rows)
        if len(keys) > CROSS_CHECKED:
            keys = sorted(random.Random(len(keys)).sample(keys, CROSS_CHECKED))
        for key in keys:
            row = rows[key]
            state: dict[str, TimerRow] = {}
            snap = await journal.snapshot_row(key)
            if snap is not None:
                state[key] = snap
            for _, record in await journal.history(key):
                apply(state, record)
            assert state.get(key) == row, f"recover() says {row}, the records {state.get(key)}"
        return rows
    finally:
        await journal.close()


def batch_schedules(batch: Line) -> Iterator[Line]:
    """The ``schedule`` lines a ``batch`` line stands for, one per timer of the batch."""
    versions = (v for first, last in batch["versions"] for v in range(first, last + 1))
    count = batch["count"]
    for index, version in zip(range(count), versions, strict=True):
        yield {
            "op": "schedule",
            "key": f"{batch['prefix']}{index}",
            "version": version,
            "due": batch_due(batch["base"], batch["span"], count, index),
            "handler": batch["handler"],
            "kept": False,
        }


def committed_schedules(intents: list[Line]) -> list[Line]:
    schedules = []
    for line in intents:
        if line["op"] == "schedule":
            schedules.append(line)
        elif line["op"] == "batch":
            schedules.extend(batch_schedules(line))
    return schedules


def check_versions(schedules: list[Line], fires: list[Line], rows: dict[str, TimerRow]) -> None:
    """One version, one key and one due, in both logs and the journal."""
    owner: dict[int, tuple[str, float]] = {}  # version -> (key, due it was scheduled for)
    for s in schedules:
        if not s["kept"]:  # a kept timer's due may be its retry's: only its key is checked
            seen = owner.setdefault(s["version"], (s["key"], s["due"]))
            assert seen == (s["key"], s["due"]), f"version {s['version']} reused: {seen} and {s}"
    for s in schedules:
        if s["kept"] and s["version"] in owner:
            assert owner[s["version"]][0] == s["key"], f"version {s['version']} reused: {s}"
    fire_owner: dict[int, str] = {}
    for f in fires:
        assert fire_owner.setdefault(f["version"], f["key"]) == f["key"], f"version reused: {f}"
        if f["version"] in owner:
            assert owner[f["version"]][0] == f["key"], f"version {f['version']} fired as {f}"
    for key, row in rows.items():
        assert fire_owner.get(row.version, key) == key
        assert owner.get(row.version, (key,))[0] == key
    # Never early, by the wall clock: not before the firing's due, nor the scheduled due.
    for f in fires:
        assert f["wall"] >= f["due"], f"fired early: {f}"
        if f["version"] in owner:
            assert f["wall"] >= owner[f["version"]][1], f"fired before its scheduled due: {f}"
        if f["attempt"] == 1 and f["version"] in owner:
            assert f["due"] == owner[f["version"]][1], f"first attempt with another due: {f}"


def check_cancels(intents: list[Line], fires: list[Line]) -> None:
    """Cancel is final: nothing of that version fired after the cancel was called."""
    canceled = {(i["key"], i["version"]): i["mono"] for i in intents if i["op"] == "canceled"}
    for f in fires:
        mono = canceled.get((f["key"], f["version"]))
        assert mono is None or f["mono"] < mono, f"fired after its cancel returned CANCELED: {f}"


def real_starts(fires: list[Line]) -> dict[Version, list[int]]:
    """The attempt numbers each version's handler really started with, in order."""
    starts: dict[Version, list[int]] = defaultdict(list)
    for f in fires:
        starts[(f["key"], f["version"])].append(f["attempt"])
    return starts


def check_attempts(
    fires: list[Line], rows: dict[str, TimerRow], phantom_bound: int | None
) -> dict[str, int]:
    """Guarantee 5: attempts survive crashes, and only real attempts count."""
    starts = real_starts(fires)
    for version, attempts in starts.items():
        assert len(attempts) == len(set(attempts)), f"{version} started an attempt twice (not "
        f"charged before it ran: a crash-loop): {attempts}"
    phantoms = 0  # attempts charged in the journal without a real start
    unrun_dead = []
    for key, row in rows.items():
        started = starts.get((key, row.version), [])
        assert max(started, default=0) <= row.attempts, f"{key} started uncharged: {started} {row}"
        if row.state != "CANCELED":  # a cancel may stop a start whose attempt committed
            phantoms += row.attempts - len(started)
        if row.state != "DEAD" or key in SHARES_ITS_START_WITH_KILLS:
            continue
        if not len(started) == row.attempts == MAX_ATTEMPTS[row.handler]:
            unrun_dead.append((key, row.attempts, sorted(started)))
    dead = sum(row.state == "DEAD" for row in rows.values())
    assert not unrun_dead, (
        f"{len(unrun_dead)} of {dead} DEAD timers without max_attempts real handler starts "
        f"(key, attempts charged, attempts really started): {unrun_dead[:5]}"
    )
    if phantom_bound is not None:
        assert phantoms <= phantom_bound, (
            f"{phantoms} attempts were charged without their handler starting; the crashes "
            f"could interrupt at most {phantom_bound} handler starts"
        )
    return {"dead": dead, "unstarted_attempts": phantoms}


def check_at_least_once(
    schedules: list[Line], intents: list[Line], fires: list[Line], rows: dict[str, TimerRow]
) -> None:
    """Every committed, uncancelled version fired, unless a later version of its key replaced
    it (that one is then held to these rules through the journal's row), or a cancel of it was
    under way and committed."""
    cancel_starts = {(i["key"], i["version"]) for i in intents if i["op"] == "cancel-start"}
    canceled = {(i["key"], i["version"]) for i in intents if i["op"] == "canceled"}
    fired_versions: dict[str, set[int]] = defaultdict(set)
    for f in fires:
        fired_versions[f["key"]].add(f["version"])
    unfired = []
    for s in schedules:
        key, version = s["key"], s["version"]
        row = rows.get(key)
        assert row is not None, f"committed timer lost: {s}"
        assert row.version >= version, f"{key} went back to an older version: {s}, {row}"
        if (key, version) in canceled or any(v >= version for v in fired_versions[key]):
            continue
        if row.version > version:
            continue  # replaced by a later version
        if row.state == "CANCELED" and (key, version) in cancel_starts:
            continue  # a cancel that was under way when the worker was killed, committed
        unfired.append((s, row))
    assert not unfired, f"{len(unfired)} committed, uncancelled, never fired: {unfired[:5]}"

    # Nothing is live at the end; every final version (logged or not) ended as it may.
    for key, row in rows.items():
        assert row.state in FINISHED, f"{key} is still {row.state} after the final drain: {row}"
        if row.state == "CANCELED":
            assert (key, row.version) in cancel_starts, f"{key} cancelled by nobody: {row}"
        elif row.state == "SUCCEEDED":
            assert row.version in fired_versions[key], f"{key} SUCCEEDED, never fired: {row}"


def check_batches(intents: list[Line], rows: dict[str, TimerRow]) -> int:
    """A ``schedule_many`` cut by a kill is in the journal whole or not at all (one commit).
    Returns how many were cut."""
    started = {(i["run"], i["number"]): i["count"] for i in intents if i["op"] == "batch-start"}
    for i in intents:
        if i["op"] == "batch":
            del started[(i["run"], i["number"])]
    if not started:
        return 0
    present: Counter[tuple[int, int]] = Counter()
    for key in rows:
        if key.startswith("b"):
            run, number, _ = key[1:].split("-")
            present[(int(run), int(number))] += 1
    for batch, count in started.items():
        assert present[batch] in (0, count), f"batch {batch}: {present[batch]} of {count} kept"
    return len(started)


def check_poison(fires: list[Line], rows: dict[str, TimerRow], final: bool) -> None:
    """The poison timers: max_attempts attempts, then DEAD (not retried forever). Only
    ``poison-final`` (with ``final``) must exist: the others' runs may all be killed early."""
    for key in ("poison-chaos", "poison-queue", "poison-final"):
        row = rows.get(key)
        assert row is not None or key != "poison-final" or not final, f"{key} lost"
        if row is None:
            continue
        assert row.state == "DEAD" and row.attempts == POISON_ATTEMPTS, f"{key}: {row}"
    if not final:
        return
    starts = [f["attempt"] for f in fires if f["key"] == "poison-final"]
    assert starts == [1, 2, 3], f"the poison timer ran {starts}, not exactly 3 times"


def check(
    intents: list[Line],
    fires: list[Line],
    rows: dict[str, TimerRow],
    *,
    poison: bool = True,
    phantom_bound: int | None = None,
) -> dict[str, int]:
    """Every assertion, in an order that names the first broken guarantee. Returns figures."""
    schedules = committed_schedules(intents)
    assert schedules, "no schedule was ever committed: the kills came too early"
    assert fires, "nothing ever fired"
    check_versions(schedules, fires, rows)
    check_cancels(intents, fires)
    figures = check_attempts(fires, rows, phantom_bound)
    cut = check_batches(intents, rows)
    check_at_least_once(schedules, intents, fires, rows)
    check_poison(fires, rows, final=poison)
    return {
        "committed": len(schedules),
        "fired": len(fires),
        "canceled": sum(i["op"] == "canceled" for i in intents),
        "cut_batches": cut,
        **figures,
    }
