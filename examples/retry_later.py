"""A flaky downstream call: retries with backoff and jitter, dead letters, and redrive.

    python examples/retry_later.py               # about two seconds

- A handler that raises is retried per its :class:`~wheel_engine.RetryPolicy`: the delay after
  attempt ``n`` is drawn from ``[0, min(max_delay, initial * multiplier ** (n - 1))]`` ("full
  jitter"), so a thousand timers failing together do not all retry in the same instant.
- ``timeout=`` bounds one attempt: an attempt running longer is cancelled and counts as failed.
- When the attempts run out the timer is ``DEAD``: it stays in the journal (``wheel-engine list
  DB --state DEAD``) with its last error, and fires no more.
- :class:`~wheel_engine.PermanentError` means "retrying cannot help" (a 4xx, a validation
  error): the timer is DEAD at once.
- Once the cause is fixed, ``await engine.redrive(key)`` (or ``wheel-engine redrive DB KEY``:
  through the running engine's admin socket when it serves one, ``Engine(..., admin=True)``,
  straight into the journal when no engine runs) puts a DEAD timer back to PENDING with its
  attempts reset.
"""

from __future__ import annotations

import asyncio
import sys

from wheel_engine import Engine, Firing, PermanentError, RetryPolicy, TimerState
from wheel_engine.testing import VirtualClock


class InvoiceService:
    """A downstream that is down for a while, and rejects bad invoices for good."""

    def __init__(self, failures_before_up: int) -> None:
        self.failures_left = failures_before_up
        self.delivered: dict[str, str] = {}  # idempotency key -> invoice: delivered once
        self.calls = 0

    async def send(self, invoice: str, idempotency_key: str) -> None:
        self.calls += 1
        if invoice.startswith("bad"):
            raise PermanentError(f"invoice {invoice} rejected: 422 unknown customer")
        if self.failures_left > 0:
            self.failures_left -= 1
            raise ConnectionError("503 service unavailable")
        self.delivered.setdefault(idempotency_key, invoice)


async def main(clock: VirtualClock | None = None, journal: str | None = None) -> dict[str, str]:
    """Returns each invoice's final state."""
    downstream = InvoiceService(failures_before_up=2)
    engine = Engine(journal, clock=clock)
    policy = RetryPolicy(max_attempts=4, initial=0.1, multiplier=2.0, max_delay=1.0, jitter=True)

    @engine.handler("invoices.send", timeout=0.5, retry=policy)
    async def send_invoice(firing: Firing) -> None:
        print(f"  {firing.key} attempt {firing.attempt}")
        await downstream.send(firing.payload["invoice"], firing.idempotency_key)

    async def wait(seconds: float) -> None:
        if clock is not None:
            await clock.advance(seconds)
        else:
            await asyncio.sleep(seconds)

    async with engine:
        print("three invoices; the downstream fails twice, then recovers")
        await engine.schedule("invoices.send", delay=0, payload={"invoice": "A"}, key="inv:A")
        await engine.schedule("invoices.send", delay=0, payload={"invoice": "bad-B"}, key="inv:B")
        await wait(0.6)  # A: two failures, then delivered on attempt 3. B: dead at once.

        print("the downstream goes down for good: C runs out of attempts")
        downstream.failures_left = 1_000
        await engine.schedule("invoices.send", delay=0, payload={"invoice": "C"}, key="inv:C")
        await wait(1.0)  # at most 0.1 + 0.2 + 0.4 s of backoff between its four attempts

        for key in ("inv:A", "inv:B", "inv:C"):
            info = engine.get(key)
            assert info is not None
            print(f"{key}: {info.state.value} after {info.attempts} attempt(s); {info.last_error}")

        print("the downstream is fixed: redrive the dead letters that can now succeed")
        downstream.failures_left = 0
        for info in engine.timers(state=TimerState.DEAD, handler="invoices.send"):
            if info.payload["invoice"].startswith("bad"):
                continue  # a permanent error: redriving cannot help
            await engine.redrive(info.key)
        await wait(0.3)
        states = {}
        for key in ("inv:A", "inv:B", "inv:C"):
            info = engine.get(key)
            assert info is not None
            states[key] = info.state.value
        print(f"final: {states}; delivered {sorted(downstream.delivered.values())}")
    return states


if __name__ == "__main__":
    final = asyncio.run(main())
    expected = {"inv:A": "SUCCEEDED", "inv:B": "DEAD", "inv:C": "SUCCEEDED"}
    sys.exit(0 if final == expected else 1)
