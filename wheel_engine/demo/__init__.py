"""The order-timeout demo: orders that cancel themselves, and a crash in the middle.

``wheel-engine demo`` (or ``make demo``) tells the whole story in under a minute:

1. A plan of a few thousand orders is written to an SQLite *orders* database, separate from the
   timer journal (:mod:`~wheel_engine.demo.plan`). Each order gets a payment timeout of a few
   seconds. Some customers pay early, some at the last instant before the timeout, some just
   after it, some never.
2. A worker process (:mod:`~wheel_engine.demo.worker`, the part to read as an example) runs an
   :class:`~wheel_engine.Engine` on its own journal: creating an order schedules its timeout,
   paying cancels it, and the timeout's handler cancels the order through a conditional update,
   which makes it idempotent and the pay/timeout race safe.
3. Partway through, the supervisor (:mod:`~wheel_engine.demo.supervisor`) kills the worker with
   ``SIGKILL`` and starts a new one on the same journal: it recovers every timer, fires the
   overdue ones at once, and re-fires the ones whose handler was interrupted; those second
   firings change nothing.
4. At the end the verdict (:mod:`~wheel_engine.demo.verdict`) checks every order, and the report
   (:mod:`~wheel_engine.demo.report`) prints lateness, throughput and how many timers fired
   twice. The demo exits non-zero if any check fails.

The command line is the CLI's (``wheel-engine demo --help``); ``python -m wheel_engine.demo``
runs the same.
"""

from __future__ import annotations

from wheel_engine.demo.plan import HANDLER, JOURNAL_DB, ORDERS_DB, Plan, write_plan
from wheel_engine.demo.supervisor import run
from wheel_engine.demo.verdict import Outcome, check

__all__ = ["HANDLER", "JOURNAL_DB", "ORDERS_DB", "Outcome", "Plan", "check", "run", "write_plan"]
