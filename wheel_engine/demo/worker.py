"""The demo's worker: an order service that uses the engine, as a real service would.

Read this file as an example. Creating an order schedules a timer ``order:<id>`` at the
order's payment deadline (committed before the order row is written, with
``on_conflict="keep"`` so that a retried request after a crash keeps the first deadline).
Paying runs ``UPDATE ... SET status='PAID' WHERE status='UNPAID'`` and then cancels the
timer. The timer's handler runs ``UPDATE ... SET status='CANCELLED' WHERE status='UNPAID'``:
whichever of the two commits first wins, the other changes nothing. That conditional update
is what makes the handler idempotent and the pay/timeout race safe, across any crash.

The database stays the truth, and the timers are its fast path: a recurring sweep (every
``sweep_every`` seconds, one recurrence in the journal, so one run at a time whichever worker
is up) cancels the UNPAID orders ``grace`` seconds past their deadline, with the same
conditional update. The plan's ``timer-lost`` customers have their timer deleted on purpose
right after the order is created (a timer lost upstream): only the sweep can catch them.

Run by the supervisor as ``python -m wheel_engine.demo.worker DIR N`` (worker number ``N``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from wheel_engine.demo.plan import (
    HANDLER,
    JOURNAL_DB,
    ORDERS_DB,
    SWEEP_HANDLER,
    SWEEP_NAME,
    connect,
    transaction,
)

if TYPE_CHECKING:
    from wheel_engine import Engine, Firing

__all__ = ["Worker", "main"]

logger = logging.getLogger(__name__)

#: How long a new worker keeps retrying the journal's lock: the killed worker's lock goes
#: with its process, which the kernel may take a moment to reap.
LOCK_RETRIES, LOCK_RETRY_SECONDS = 200, 0.025


class Worker:
    """The order service: its handler, its two operations, and the plan it plays."""

    def __init__(self, workdir: Path, number: int) -> None:
        self.workdir = workdir
        self.number = number
        self.db = connect(workdir / ORDERS_DB)
        self.rng = random.Random(os.getpid())
        self.engine: Engine | None = None
        shape = json.loads(
            self.db.execute("SELECT value FROM meta WHERE name = 'plan'").fetchone()[0]
        )
        self.sweep_every, self.grace = float(shape["sweep_every"]), float(shape["grace"])

    # --- the timer's handler: idempotent through a conditional update -------------------------
    async def on_timeout(self, firing: Firing) -> None:
        order_id = firing.payload["order"]
        now = time.time()
        with transaction(self.db):
            cur = self.db.execute(
                "UPDATE orders SET status = 'CANCELLED', cancelled_at = ?, cancelled_by = 'timer' "
                "WHERE id = ? AND status = 'UNPAID'",
                (now, order_id),
            )
            self.db.execute(
                "INSERT INTO firings (order_id, idempotency_key, attempt, due, fired_at, "
                "applied, worker) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    order_id,
                    firing.idempotency_key,
                    firing.attempt,
                    firing.due,
                    now,
                    cur.rowcount,
                    self.number,
                ),
            )
        # "Tell the customer": a downstream call, keyed by firing.idempotency_key so that a
        # repeat after a crash is recognised downstream. A SIGKILL in here means this firing is
        # not acknowledged, and it fires again after the restart: absorbed by the WHERE above.
        await asyncio.sleep(self.rng.uniform(0.02, 0.2))

    # --- the sweep: the backstop for a timer lost anywhere, idempotent the same way ------------
    async def on_sweep(self, firing: Firing) -> None:
        now = time.time()
        with transaction(self.db):
            cur = self.db.execute(
                "UPDATE orders SET status = 'CANCELLED', cancelled_at = ?, cancelled_by = 'sweep' "
                "WHERE status = 'UNPAID' AND due < ?",
                (now, now - self.grace),
            )
            self.db.execute(
                "INSERT INTO sweeps (idempotency_key, at, cancelled, worker) VALUES (?, ?, ?, ?)",
                (firing.idempotency_key, now, cur.rowcount, self.number),
            )

    async def start_sweep(self) -> None:
        """The sweep's recurrence, defined once per journal: a restarted worker finds it
        recovered (defining it again would restart its grid of occurrences)."""
        assert self.engine is not None
        if not any(r.name == SWEEP_NAME for r in await self.engine.recurrences()):
            await self.engine.schedule_recurring(SWEEP_NAME, SWEEP_HANDLER, every=self.sweep_every)

    async def lose_timer(self, order_id: str) -> None:
        """Delete the order's timer on purpose (a timer lost upstream), once: noted only if a
        pending timer was really deleted (a crash may have let it fire first)."""
        assert self.engine is not None
        row = self.db.execute(
            "SELECT timer_deleted_at FROM orders WHERE id = ?", (order_id,)
        ).fetchone()
        if row is None or row[0] is not None:
            return
        result = await self.engine.cancel(f"order:{order_id}")
        if result.value == "CANCELED":
            with transaction(self.db):
                self.db.execute(
                    "UPDATE orders SET timer_deleted_at = ? WHERE id = ?", (time.time(), order_id)
                )

    # --- the service's two operations ---------------------------------------------------------
    async def create_order(self, order_id: str, timeout: float) -> float:
        """Schedule the order's timer (committed), then record the order. Returns created_at."""
        assert self.engine is not None
        row = self.db.execute("SELECT created_at FROM orders WHERE id = ?", (order_id,)).fetchone()
        if row is not None:
            return float(row[0])
        started = time.time()
        # on_conflict="keep": if a crash hit between these two steps, the retried request
        # finds the timer already scheduled and keeps it (and its deadline).
        info = await self.engine.schedule(
            HANDLER,
            at=started + timeout,
            payload={"order": order_id},
            key=f"order:{order_id}",
            on_conflict="keep",
        )
        took = time.time() - started
        created_at = info.due - timeout
        with transaction(self.db):
            self.db.execute(
                "INSERT OR IGNORE INTO orders (id, created_at, due, status, schedule_seconds) "
                "VALUES (?, ?, ?, 'UNPAID', ?)",
                (order_id, created_at, info.due, took),
            )
        return created_at

    async def pay(self, order_id: str) -> None:
        """The customer pays: the order row decides the race, then the timer is cancelled."""
        assert self.engine is not None
        now = time.time()
        with transaction(self.db):
            cur = self.db.execute(
                "UPDATE orders SET status = 'PAID', paid_at = ? WHERE id = ? AND status = 'UNPAID'",
                (now, order_id),
            )
            accepted = cur.rowcount == 1
            self.db.execute(
                "INSERT OR IGNORE INTO payments (order_id, at, accepted) VALUES (?, ?, ?)",
                (order_id, now, int(accepted)),
            )
        if accepted:
            await self.cancel_timer(order_id)
        # else: the timeout won the race: the order is cancelled and the payment is refunded.

    async def cancel_timer(self, order_id: str) -> None:
        assert self.engine is not None
        result = await self.engine.cancel(f"order:{order_id}")
        with transaction(self.db):
            self.db.execute(
                "UPDATE payments SET cancel_result = ? WHERE order_id = ?",
                (result.value, order_id),
            )

    # --- driving the plan -------------------------------------------------------------------
    async def customer(
        self,
        t0: float,
        order_id: str,
        create_offset: float,
        timeout: float,
        pay: float | None,
        kind: str,
    ) -> None:
        await sleep_until(t0 + create_offset)
        created_at = await self.create_order(order_id, timeout)
        if kind == "timer-lost":
            await self.lose_timer(order_id)
        if pay is None:
            return
        await sleep_until(created_at + pay)
        await self.pay(order_id)

    async def serve(self) -> int:
        """Start the engine (recovering the journal), play the plan, wait until all settled."""
        started = time.time()
        with transaction(self.db):
            self.db.execute(
                "INSERT OR REPLACE INTO workers (n, pid, started_at) VALUES (?, ?, ?)",
                (self.number, os.getpid(), started),
            )
        engine = await self.start_engine()
        t0 = self.record_ready(started)
        await self.start_sweep()
        try:
            await self.finish_outbox()
            await self.play_plan(t0)
            await self.wait_until_settled()
        finally:
            await engine.close(grace=5.0)
        with transaction(self.db):
            self.db.execute(
                "UPDATE workers SET finished_at = ? WHERE n = ?", (time.time(), self.number)
            )
        return 0

    async def start_engine(self) -> Engine:
        """The engine on the journal, its handler registered, started (timers recovered)."""
        from wheel_engine import Engine, JournalLocked

        engine = Engine(str(self.workdir / JOURNAL_DB), max_concurrency=256)
        engine.register(HANDLER, self.on_timeout)
        engine.register(SWEEP_HANDLER, self.on_sweep)
        self.engine = engine
        for _ in range(LOCK_RETRIES):
            try:
                await engine.start()
                return engine
            except JournalLocked:
                await asyncio.sleep(LOCK_RETRY_SECONDS)
        await engine.start()
        return engine

    def record_ready(self, started: float) -> float:
        """Note the recovery in the orders database; returns the plan's t0 (set once)."""
        assert self.engine is not None
        ready = time.time()
        stats = self.engine.stats()
        recovered = int(stats.get("pending", 0)) + int(stats.get("running", 0))
        logger.info("worker %d ready: %d live timers recovered", self.number, recovered)
        with transaction(self.db):
            self.db.execute(
                "UPDATE workers SET ready_at = ?, recovered = ?, recovery_seconds = ? WHERE n = ?",
                (ready, recovered, ready - started, self.number),
            )
            self.db.execute("INSERT OR IGNORE INTO meta VALUES ('t0', ?)", (ready + 0.2,))
        return float(self.db.execute("SELECT value FROM meta WHERE name = 't0'").fetchone()[0])

    async def finish_outbox(self) -> None:
        """Cancel the timers of payments accepted before a crash but not yet cancelled."""
        pending_cancels = self.db.execute(
            "SELECT order_id FROM payments WHERE accepted = 1 AND cancel_result IS NULL"
        ).fetchall()
        for (order_id,) in pending_cancels:
            await self.cancel_timer(order_id)

    async def play_plan(self, t0: float) -> None:
        """Every customer of the plan not yet served, each on its own schedule."""
        plan = self.db.execute(
            "SELECT p.id, p.create_offset, p.timeout, p.pay_offset, p.kind FROM plan p "
            "LEFT JOIN payments y ON y.order_id = p.id "
            "WHERE y.order_id IS NULL ORDER BY p.create_offset"
        ).fetchall()
        await asyncio.gather(
            *(
                self.customer(t0, order_id, create_offset, timeout, pay, kind)
                for order_id, create_offset, timeout, pay, kind in plan
            )
        )

    async def wait_until_settled(self) -> None:
        """Until every order is paid or cancelled; then the sweep is stopped (the end of the
        demo's business day), and until no timer is pending or running."""
        assert self.engine is not None
        while self.db.execute("SELECT count(*) FROM orders WHERE status = 'UNPAID'").fetchone()[0]:
            await asyncio.sleep(0.02)
        await self.engine.cancel_recurring(SWEEP_NAME)
        while True:
            stats = self.engine.stats()
            if stats.get("pending", 0) == 0 and stats.get("running", 0) == 0:
                return
            await asyncio.sleep(0.02)


async def sleep_until(when: float) -> None:
    delay = when - time.time()
    if delay > 0:
        await asyncio.sleep(delay)


def main(workdir: Path, number: int) -> int:
    """The worker process: serve the plan in ``workdir`` as worker ``number``."""
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    worker = Worker(workdir, number)
    try:
        return asyncio.run(worker.serve())
    finally:
        worker.db.close()


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), int(sys.argv[2])))
