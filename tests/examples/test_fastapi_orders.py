"""examples/fastapi_orders.py served by uvicorn on a real socket, through a real HTTP client.

Time is driven with a VirtualClock: the engine runs in the app's lifespan on this loop, next
to the server, so ``clock.advance`` fires the order timers at once.
"""

from __future__ import annotations

import asyncio
import importlib.util
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the examples extra: pip install -e '.[examples]'")
httpx = pytest.importorskip("httpx")
uvicorn = pytest.importorskip("uvicorn")

from wheel_engine import Engine, Firing  # noqa: E402
from wheel_engine.testing import VirtualClock  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fastapi_orders.py"


def load() -> ModuleType:
    if str(EXAMPLE.parent) not in sys.path:  # as when run as a script: orders_common beside it
        sys.path.insert(0, str(EXAMPLE.parent))
    spec = importlib.util.spec_from_file_location("example_fastapi_orders", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@asynccontextmanager
async def served(
    tmp_path: Path, clock: VirtualClock, engine: Engine | None = None
) -> AsyncIterator[tuple[Any, Engine, Any]]:
    """(module, engine, an httpx client on the live server); the server stops at the end."""
    mod = load()
    engine = engine if engine is not None else Engine(str(tmp_path / "timers.db"), clock=clock)
    orders = mod.Orders(str(tmp_path / "orders.db"))
    app = mod.create_app(engine, orders, timeout=60.0, grace=0.0)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    task = asyncio.ensure_future(server.serve(sockets=[sock]))
    try:
        while not server.started:  # startup runs the lifespan: the engine starts here
            assert not task.done(), task.result()
            await asyncio.sleep(0.01)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            yield mod, engine, client
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 10.0)
        sock.close()
        orders.close()


async def test_lifespan_starts_and_closes_the_engine(tmp_path: Path) -> None:
    clock = VirtualClock()
    async with served(tmp_path, clock) as (_, engine, client):
        assert engine.journal is not None  # started before the first request
        r = await client.post("/orders", json={"amount": 5}, headers={"X-User": "ann"})
        assert r.status_code == 202
        order_id = r.json()["id"]
    await asyncio.wait_for(engine.wait_closed(), 5.0)  # closed by the lifespan's shutdown
    async with served(tmp_path, clock) as (_, _, client):  # the timer survived in the journal
        body = (await client.get(f"/orders/{order_id}")).json()
        assert body["status"] == "UNPAID" and body["timer"]["state"] == "PENDING"
        await clock.advance(61.0)
        assert (await client.get(f"/orders/{order_id}")).json()["status"] == "CANCELLED"


async def test_expiry_then_a_late_payment_is_refunded(tmp_path: Path) -> None:
    clock = VirtualClock()
    async with served(tmp_path, clock) as (_, _, client):
        r = await client.post("/orders", json={"amount": 12.5}, headers={"X-User": "ann"})
        order_id = r.json()["id"]
        await clock.advance(59.0)
        assert (await client.get(f"/orders/{order_id}")).json()["status"] == "UNPAID"
        await clock.advance(1.5)
        body = (await client.get(f"/orders/{order_id}")).json()
        assert body["status"] == "CANCELLED" and body["timer"]["state"] == "SUCCEEDED"
        r = await client.post(f"/orders/{order_id}/pay")
        assert r.status_code == 409 and r.json()["refunded"] is True


async def test_payment_cancels_the_timer(tmp_path: Path) -> None:
    clock = VirtualClock()
    async with served(tmp_path, clock) as (_, _, client):
        r = await client.post("/orders", json={"amount": 3}, headers={"X-User": "bob"})
        order_id = r.json()["id"]
        r = await client.post(f"/orders/{order_id}/pay")
        assert r.json() == {"id": order_id, "status": "PAID", "timer": "CANCELED"}
        await clock.advance(120.0)
        body = (await client.get(f"/orders/{order_id}")).json()
        assert body["status"] == "PAID" and body["timer"]["state"] == "CANCELED"
        assert (await client.post(f"/orders/{order_id}/pay")).json()["note"] == "already paid"
        assert (await client.post("/orders/nope/pay")).status_code == 404


async def test_only_the_owner_cancels_and_only_the_live_version(tmp_path: Path) -> None:
    clock = VirtualClock()
    async with served(tmp_path, clock) as (_, _, client):
        assert (await client.post("/orders", json={"amount": 1})).status_code == 401
        bad = await client.post("/orders", content=b"nonsense", headers={"X-User": "ann"})
        assert bad.status_code == 400
        r = await client.post("/orders", json={"amount": 1}, headers={"X-User": "ann"})
        order_id, version = r.json()["id"], r.json()["timer_version"]
        url = f"/orders/{order_id}/timer"
        ann = {"X-User": "ann"}
        eve = await client.delete(url, params={"version": version}, headers={"X-User": "eve"})
        assert eve.status_code == 403
        assert (await client.delete(url, headers=ann)).status_code == 400
        stale = await client.delete(url, params={"version": version + 1}, headers=ann)
        assert stale.status_code == 409 and stale.json()["result"] == "NOT_FOUND"
        done = await client.delete(url, params={"version": version}, headers=ann)
        assert done.status_code == 200 and done.json()["result"] == "CANCELED"
        await clock.advance(3600.0)
        assert (await client.get(f"/orders/{order_id}")).json()["status"] == "UNPAID"


async def test_payment_while_the_expiry_runs_wins_honestly(tmp_path: Path) -> None:
    """The race: the expiry handler has started when the payment arrives. The payment's
    conditional update wins, the timer is only asked to stop (CANCEL_REQUESTED), and the
    handler's own conditional update then finds the order PAID and changes nothing."""
    clock = VirtualClock()
    started, release = asyncio.Event(), asyncio.Event()
    engine = Engine(str(tmp_path / "timers.db"), clock=clock)
    async with served(tmp_path, clock, engine) as (mod, _, client):
        orders = mod.Orders(str(tmp_path / "orders.db"))

        async def slow_expire(firing: Firing) -> None:  # a slow downstream before the update
            started.set()
            try:
                await release.wait()
            finally:
                orders.expire(firing.payload["order"], clock.time())

        engine.register(mod.EXPIRE, slow_expire)
        r = await client.post("/orders", json={"amount": 9}, headers={"X-User": "ann"})
        order_id = r.json()["id"]
        await clock.advance(61.0)
        assert started.is_set()
        paid = await client.post(f"/orders/{order_id}/pay")
        assert paid.status_code == 200
        assert paid.json() == {"id": order_id, "status": "PAID", "timer": "CANCEL_REQUESTED"}
        await clock.advance(1.0)
        body = (await client.get(f"/orders/{order_id}")).json()
        assert body["status"] == "PAID" and body["refunded_at"] is None
        assert body["timer"]["state"] == "CANCELED"
        orders.close()


@pytest.mark.slow
def test_runs_as_a_program_and_stops_on_sigterm(tmp_path: Path) -> None:
    """The docstring's command on a real port: an order expires, SIGTERM shuts down cleanly."""
    import json
    import os
    import re
    import signal
    import subprocess
    import time

    cmd = [
        sys.executable, str(EXAMPLE), "--port", "0", "--timeout", "0.3",
        "--db", str(tmp_path / "orders.db"), "--journal", str(tmp_path / "timers.db"),
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    try:
        assert proc.stderr is not None
        base = None
        for line in proc.stderr:  # uvicorn logs where it listens once the lifespan has started
            if match := re.search(r"running on (http://\S+)", line, re.IGNORECASE):
                base = match.group(1)
                break
        assert base is not None
        with httpx.Client(base_url=base) as http:
            created = http.post("/orders", json={"amount": 5}, headers={"X-User": "ann"})
            order_id = created.json()["id"]
            deadline = time.monotonic() + 5.0
            while time.monotonic() < deadline:
                if http.get(f"/orders/{order_id}").json()["status"] == "CANCELLED":
                    break
                time.sleep(0.05)
            assert http.get(f"/orders/{order_id}").json()["status"] == "CANCELLED"
        os.kill(proc.pid, signal.SIGTERM)
        # uvicorn shuts down gracefully, then re-raises the signal so a supervisor sees it
        assert proc.wait(timeout=10) in (0, -signal.SIGTERM)
        assert "Application shutdown complete" in proc.stderr.read()
        shown = subprocess.run(  # the lifespan closed the engine: its ack is in the journal
            [
                sys.executable,
                "-m",
                "wheel_engine.cli",
                "show",
                cmd[-1],
                f"order:{order_id}",
                "--json",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        assert json.loads(shown.stdout)["state"] == "SUCCEEDED"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
