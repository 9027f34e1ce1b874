"""examples/order_service.py through a real HTTP client against the running app."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestClient, TestServer

from wheel_engine import Engine
from wheel_engine.testing import VirtualClock

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "order_service.py"


def load() -> ModuleType:
    if str(EXAMPLE.parent) not in sys.path:  # as when run as a script: orders_common beside it
        sys.path.insert(0, str(EXAMPLE.parent))
    spec = importlib.util.spec_from_file_location("example_order_service", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def start(tmp_path: Path, clock: VirtualClock) -> tuple[Any, TestClient[Any, Any]]:
    mod = load()
    engine = Engine(None, clock=clock)
    orders = mod.Orders(str(tmp_path / "orders.db"))
    app = mod.create_app(engine, orders, timeout=60.0)
    client = TestClient(TestServer(app))
    await client.start_server()
    return mod, client


async def test_unpaid_order_expires_and_late_payment_is_refunded(tmp_path: Path) -> None:
    clock = VirtualClock()
    _, client = await start(tmp_path, clock)
    try:
        r = await client.post("/orders", json={"amount": 12.5}, headers={"X-User": "ann"})
        assert r.status == 202
        created = await r.json()
        order_id = created["id"]
        assert created["timer_version"] >= 1

        r = await client.get(f"/orders/{order_id}")
        body = await r.json()
        assert body["status"] == "UNPAID"
        assert body["timer"]["state"] == "PENDING"

        await clock.advance(59.0)
        assert (await (await client.get(f"/orders/{order_id}")).json())["status"] == "UNPAID"
        await clock.advance(1.5)
        body = await (await client.get(f"/orders/{order_id}")).json()
        assert body["status"] == "CANCELLED"
        assert body["timer"]["state"] == "SUCCEEDED"

        r = await client.post(f"/orders/{order_id}/pay")
        assert r.status == 409
        body = await r.json()
        assert body["refunded"] is True and body["status"] == "CANCELLED"
        assert (await (await client.get(f"/orders/{order_id}")).json())["refunded_at"] is not None
    finally:
        await client.close()


async def test_payment_cancels_the_timer(tmp_path: Path) -> None:
    clock = VirtualClock()
    _, client = await start(tmp_path, clock)
    try:
        r = await client.post("/orders", json={"amount": 3}, headers={"X-User": "bob"})
        order_id = (await r.json())["id"]
        await clock.advance(30.0)
        r = await client.post(f"/orders/{order_id}/pay")
        assert r.status == 200
        assert await r.json() == {"id": order_id, "status": "PAID", "timer": "CANCELED"}
        await clock.advance(120.0)
        body = await (await client.get(f"/orders/{order_id}")).json()
        assert body["status"] == "PAID"
        assert body["timer"]["state"] == "CANCELED"
        r = await client.post(f"/orders/{order_id}/pay")  # paying twice is harmless
        assert r.status == 200 and (await r.json())["note"] == "already paid"
        assert (await client.post("/orders/nope/pay")).status == 404
    finally:
        await client.close()


async def test_cancel_timer_needs_owner_and_live_version(tmp_path: Path) -> None:
    clock = VirtualClock()
    _, client = await start(tmp_path, clock)
    try:
        assert (await client.post("/orders", json={"amount": 1})).status == 401
        r = await client.post("/orders", data=b"nonsense", headers={"X-User": "ann"})
        assert r.status == 400
        r = await client.post("/orders", json={"amount": 1}, headers={"X-User": "ann"})
        created = await r.json()
        order_id, version = created["id"], created["timer_version"]
        url = f"/orders/{order_id}/timer"

        r = await client.delete(url, params={"version": version}, headers={"X-User": "eve"})
        assert r.status == 403
        r = await client.delete(url, headers={"X-User": "ann"})
        assert r.status == 400
        r = await client.delete(url, params={"version": version + 100}, headers={"X-User": "ann"})
        assert r.status == 409 and (await r.json())["result"] == "NOT_FOUND"
        r = await client.delete(url, params={"version": version}, headers={"X-User": "ann"})
        assert r.status == 200 and (await r.json())["result"] == "CANCELED"
        r = await client.delete(url, params={"version": version}, headers={"X-User": "ann"})
        assert r.status == 409 and (await r.json())["result"] == "ALREADY_DONE"

        await clock.advance(3600.0)  # the timer was cancelled: the order never expires
        assert (await (await client.get(f"/orders/{order_id}")).json())["status"] == "UNPAID"
        assert (await client.get("/orders/missing")).status == 404
    finally:
        await client.close()


@pytest.mark.slow
async def test_runs_as_a_program_and_stops_on_sigterm(tmp_path: Path) -> None:
    """The real program on a real port and a durable journal: expiry survives a restart."""
    cmd = [
        sys.executable,
        str(EXAMPLE),
        "--port",
        "0",
        "--timeout",
        "0.6",
        "--db",
        str(tmp_path / "orders.db"),
        "--journal",
        str(tmp_path / "timers.db"),
    ]

    def launch() -> tuple[subprocess.Popen[str], str]:
        proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("listening on "), line
        return proc, line.split()[-1]

    proc, base = launch()
    try:
        async with ClientSession() as http:
            r = await http.post(f"{base}/orders", json={"amount": 5}, headers={"X-User": "ann"})
            assert r.status == 202
            expiring = (await r.json())["id"]
            r = await http.post(f"{base}/orders", json={"amount": 7}, headers={"X-User": "ann"})
            paid = (await r.json())["id"]
            r = await http.post(f"{base}/orders/{paid}/pay")
            assert (await r.json())["status"] == "PAID"
        proc.send_signal(signal.SIGTERM)  # before the first order's timeout
        assert proc.wait(timeout=10) == 0
        assert proc.stdout is not None
        assert "stopped" in proc.stdout.read()

        proc, base = launch()  # the timer was in the journal; it fires after the restart
        async with ClientSession() as http:
            deadline = time.monotonic() + 5.0
            status = None
            while time.monotonic() < deadline:
                status = (await (await http.get(f"{base}/orders/{expiring}")).json())["status"]
                if status == "CANCELLED":
                    break
                await asyncio.sleep(0.05)
            assert status == "CANCELLED"
            body = await (await http.get(f"{base}/orders/{paid}")).json()
            assert body["status"] == "PAID"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


async def test_cancel_timer_while_the_expiry_runs_is_only_requested(tmp_path: Path) -> None:
    clock = VirtualClock()
    mod = load()
    engine = Engine(None, clock=clock)
    orders = mod.Orders(str(tmp_path / "orders.db"))
    app = mod.create_app(engine, orders, timeout=60.0)
    started = asyncio.Event()

    async def slow_expire(firing: Any) -> None:  # stands in for a slow downstream call
        started.set()
        await asyncio.Event().wait()

    engine.register(mod.EXPIRE, slow_expire)
    client = TestClient(TestServer(app))
    await client.start_server()
    try:
        r = await client.post("/orders", json={"amount": 1}, headers={"X-User": "ann"})
        created = await r.json()
        await clock.advance(61.0)
        assert started.is_set()
        r = await client.delete(
            f"/orders/{created['id']}/timer",
            params={"version": created["timer_version"]},
            headers={"X-User": "ann"},
        )
        assert r.status == 202
        assert (await r.json())["result"] == "CANCEL_REQUESTED"
        await clock.advance(1.0)
        body = await (await client.get(f"/orders/{created['id']}")).json()
        assert body["timer"]["state"] == "CANCELED"
    finally:
        await client.close()
