"""Reminders at absolute times, and moving one with ``on_conflict="replace"``.

    python examples/reminders.py                 # in memory, about a second
    python examples/reminders.py reminders.db    # durable: run it twice, kill it in between

Killed (``kill -9``) while it runs on a journal, the next run first fires what the killed one
left due or unfinished: the engine recovers those timers from the journal and fires each at
least once, which is the point. The program tells them apart from its own three reminders by
version (each run's schedules get new, higher versions) and says so; it exits 0 when its own
three fired, and 1, saying what is missing, otherwise.

A reminder is a timer whose key names it (``reminder:<user>:<what>``), due at an aware
``datetime`` given with ``at=``. Scheduling the same key again *moves* it: the default
``on_conflict="replace"`` gives it the new time and payload and a new version, and the old time
never fires. ``on_conflict="keep"`` leaves a live reminder as it is (an "ensure it exists"), and
``on_conflict="error"`` raises :class:`~wheel_engine.DuplicateKey`.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import sys
import time
from typing import Any

from wheel_engine import DuplicateKey, Engine, Firing, TimerInfo
from wheel_engine.testing import VirtualClock


def at(now: float, seconds: float) -> dt.datetime:
    """An aware datetime ``seconds`` after ``now`` (epoch seconds)."""
    return dt.datetime.fromtimestamp(now + seconds, tz=dt.UTC)


#: What this program's own run sends, in order: the moved dentist reminder fires last.
EXPECTED = ["ann: stand-up in 5 minutes", "ann: lunch with Carl", "bob: dentist moved to 4"]


async def main(journal: str | None = None, clock: VirtualClock | None = None) -> list[str]:
    """Schedule, move and fire three reminders; returns what this run sent, in order.

    Reminders an earlier, killed run left in the journal fire too (recovered, at least once):
    they are printed as such, and not in the list returned.
    """
    engine = Engine(journal, clock=clock)
    wall = clock.time if clock is not None else time.time
    now = wall()
    fired: list[tuple[int, str]] = []  # (version, text) of every firing, this run's or not
    ours: set[int] = set()  # the versions this run scheduled

    @engine.handler("reminders.send")
    async def send(firing: Firing) -> None:
        # A real one would send an e-mail keyed by firing.idempotency_key, so that a repeat
        # after a crash is dropped by the mail service.
        text = f"{firing.payload['user']}: {firing.payload['text']}"
        late = wall() - firing.due
        print(f"reminder {firing.key} v{firing.version}: {text} ({late * 1000:.0f} ms late)")
        fired.append((firing.version, text))

    async def remind(user: str, what: str, when: dt.datetime, text: str, **kw: Any) -> TimerInfo:
        info = await engine.schedule(
            "reminders.send",
            at=when,
            payload={"user": user, "text": text},
            key=f"reminder:{user}:{what}",
            **kw,
        )
        ours.add(info.version)
        return info

    async with engine:
        await remind("ann", "standup", at(now, 0.4), "stand-up in 5 minutes")
        first: TimerInfo = await remind("bob", "dentist", at(now, 0.2), "dentist at 3")
        await remind("ann", "lunch", at(now, 0.8), "lunch with Carl")

        # Bob's dentist moved: same key, new time and text, a new version. 0.2 s never fires.
        moved = await remind("bob", "dentist", at(now, 1.0), "dentist moved to 4")
        assert moved.version > first.version
        print(f"moved {moved.key}: v{first.version} -> v{moved.version}, due {moved.due:.3f}")

        # "keep": make sure a reminder exists without moving it.
        kept = await remind("ann", "standup", at(now, 60.0), "ignored", on_conflict="keep")
        assert kept.due == at(now, 0.4).timestamp()
        # "error": refuse to overwrite.
        try:
            await remind("ann", "lunch", at(now, 9.0), "dup", on_conflict="error")
        except DuplicateKey as exc:
            print(f"not rescheduled: {exc}")

        if clock is not None:
            await clock.advance(1.2)
        else:
            await asyncio.sleep(1.2)
    recovered = [text for version, text in fired if version not in ours]
    if recovered:
        print(
            f"also fired {len(recovered)} reminder(s) an earlier run left in the journal "
            f"(recovered after it was killed, fired at least once): {', '.join(recovered)}"
        )
    return [text for version, text in fired if version in ours]


if __name__ == "__main__":
    result = asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else None))
    if result != EXPECTED:
        print(f"expected this run to send {EXPECTED}, it sent {result}", file=sys.stderr)
    sys.exit(0 if result == EXPECTED else 1)
