"""One node for test_postgres_nodes.py: fires the timers of the partitions it holds, the way the
engine will (lease rounds, horizon loader, change feed, compare-and-set, fenced acks), with a
trivial handler that only logs the firing.

Usage: pg_node_worker.py URL NODE LEASE LOG. Runs until SIGTERM, then closes the store
(releasing its partitions). Each firing is logged, flushed, *before* its ack is sent.
"""

from __future__ import annotations

import asyncio
import heapq
import json
import signal
import sys
import time
from collections.abc import Iterable
from typing import IO

from journal.postgres import Outcome, PostgresStore, StoredTimer

#: Seconds the loop sleeps at most between looks at the clock and the feed.
IDLE = 0.2
#: Seconds a batch of "handlers" runs between its attempt and its ack: a kill can land there.
HANDLER_SECONDS = 0.05


class Node:
    def __init__(self, store: PostgresStore, log: IO[str]) -> None:
        self.store = store
        self.log = log
        self.heap: list[tuple[float, int, str]] = []
        self.queued: set[tuple[str, int]] = set()
        self.next_round = 0.0

    def push(self, rows: Iterable[StoredTimer]) -> None:
        for row in rows:
            if row.state == "PENDING" and (row.key, row.version) not in self.queued:
                self.queued.add((row.key, row.version))
                heapq.heappush(self.heap, (row.due, row.version, row.key))

    async def lease_round(self) -> None:
        store = self.store
        store.listener.released = False
        change = await store.maintain()
        self.next_round = time.monotonic() + store.leases.renew_every
        surplus = store.leases.surplus(change.live_nodes)
        if surplus:  # nothing is in flight between two loop turns: release at once
            await store.release(surplus)
        if change.gained:
            self.push(await store.catch_up(list(change.gained)))
        self.push(await store.refill())

    async def fire_due(self) -> None:
        now = time.time()
        batch: list[tuple[str, int]] = []
        while self.heap and self.heap[0][0] <= now and len(batch) < 200:
            _, version, key = heapq.heappop(self.heap)
            batch.append((key, version))
        if not batch:
            return
        versions = dict(batch)
        result = await self.store.attempt(batch)
        for key, due in result.early:  # our clock ran ahead of the database's: try again
            heapq.heappush(self.heap, (due, versions[key], key))
        for c in result.claimed:
            line = {"key": c.key, "version": c.version, "attempt": c.attempt}
            line |= {"node": self.store.node, "db_now": result.db_now, "epoch": c.epoch}
            self.log.write(json.dumps(line) + "\n")
        self.log.flush()
        await asyncio.sleep(HANDLER_SECONDS)
        await self.store.finish(
            [Outcome(c.key, c.version, c.epoch, "SUCCEEDED") for c in result.claimed]
        )

    async def run(self, stop: asyncio.Event) -> None:
        store = self.store
        await store.start_feed()
        while not stop.is_set():
            if time.monotonic() >= self.next_round or store.listener.released:
                await self.lease_round()
            changed = await store.changes()
            self.push(r for r in changed if store.horizon.covers(r.due, r.version))
            await self.fire_due()
            wait = IDLE if not self.heap else self.heap[0][0] - time.time()
            wait = min(wait, IDLE, self.next_round - time.monotonic())
            if wait > 0:
                await store.wait(wait)


async def main(url: str, node: str, lease: float, log_path: str) -> None:
    store = await PostgresStore.open(url, node=node, lease=lease, horizon=60.0)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    with open(log_path, "a", encoding="utf-8") as log:
        try:
            await Node(store, log).run(stop)
        finally:
            await store.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]))
