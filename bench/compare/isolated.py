"""APScheduler and huey run each round in a child process, so their libraries stay out of ours.

Why: a library imported into the bench's process stays there, and every full collection of
the cyclic GC in a later round walks its objects. APScheduler 3 (with SQLAlchemy) and huey add
about 37,000 tracked objects (measured where figure 4's concurrent ``schedule()`` runs: 43.6k
objects alive without them, 80.6k with them). A burst of 20,000 awaited calls runs two full
collections whatever the subject (asyncio's own tasks and futures drive them; a gather of bare
futures runs the same two); with those imports they took about 115 ms of a 300 ms burst
instead of 55 ms (``gc.callbacks``). So a subject that allocates, as the engine and asyncio
must, paid for a peer imported before it, and raw ``sqlite3``, which allocates almost nothing,
did not. End to end the change is smaller than this machine's noise: figure 4's concurrent
ratio was 0.13-0.16x in four runs of ``--only durable`` before it and 0.15-0.17x in four
runs after, alternating. What a large heap costs such a burst is a property of
the process, measured on its own by ``python -m bench.compare.concurrent_floor heap``.

How: ``in_child("aps_schedule", path, n)`` runs ``peers.aps_schedule(path, n)`` in a fresh
``python -m bench.compare.isolated``, which prints the adapter's metrics as one JSON line.
The adapter times itself as before, so the child's start-up is outside the figure. Only the
adapters named in :data:`ADAPTERS` can be run this way; a child that fails reports its error,
which the round records as the contender's error.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.compare import peers

#: The adapters a child may run: each takes the scratch database's path first, then numbers
#: (and huey's ``fsync`` flag), all of which JSON carries as they are.
ADAPTERS: dict[str, Callable[..., dict[str, float]]] = {
    "aps_schedule": peers.aps_schedule,
    "aps_fire": peers.aps_fire,
    "huey_schedule": peers.huey_schedule,
    "huey_fire": peers.huey_fire,
}

#: A child that has not answered by then has hung: far beyond the slowest round (seconds).
TIMEOUT = 900.0


class ChildFailed(RuntimeError):
    """The child process exited without metrics; the message is its own error line."""


def in_child(adapter: str, path: Path, *args: Any) -> dict[str, float]:
    """``ADAPTERS[adapter](path, *args)``, run in a fresh Python process; its metrics.

    The child's progress and warnings go to our stderr; its last stdout line is the answer.
    """
    if adapter not in ADAPTERS:
        raise ValueError(f"no adapter {adapter!r}; known: {', '.join(sorted(ADAPTERS))}")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    proc = subprocess.run(
        [sys.executable, "-m", "bench.compare.isolated", adapter, str(path), json.dumps(args)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        timeout=TIMEOUT,
        check=False,
    )
    lines = proc.stdout.strip().splitlines()
    answer: dict[str, Any] = json.loads(lines[-1]) if lines else {}
    if proc.returncode != 0 or "error" in answer:
        why = answer.get("error") or f"exited with {proc.returncode} and no answer"
        raise ChildFailed(f"{adapter} in a child process: {why}")
    metrics: dict[str, float] = answer["metrics"]
    return metrics


def main(argv: list[str]) -> int:
    """The child: run one adapter and print ``{"metrics": ...}`` or ``{"error": ...}``."""
    adapter, path, args_json = argv
    try:
        metrics = ADAPTERS[adapter](Path(path), *json.loads(args_json))
    except Exception as exc:  # the parent records it as this contender's error
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
        return 1
    print(json.dumps({"metrics": metrics}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
