"""examples/fastapi_orders_pg.py on the suite's PostgreSQL server, through httpx's ASGI client.

Real time (the timers are due by the database's clock): the timeout is a fraction of a second.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

pytest.importorskip("fastapi", reason="the examples extra: pip install -e '.[examples]'")
pytest.importorskip("psycopg", reason="the postgres extra: pip install -e '.[postgres]'")
httpx = pytest.importorskip("httpx")

from pg_cluster import sql  # noqa: E402

from wheel_engine import Engine  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fastapi_orders_pg.py"

pytestmark = pytest.mark.slow


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("example_fastapi_orders_pg", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


async def _state(client: httpx.AsyncClient, order: str) -> str:
    return str((await client.get(f"/orders/{order}")).json()["state"])


async def test_orders_and_their_timeouts_commit_together(pg_url: str) -> None:
    mod = load()
    app = mod.create_app(pg_url, Engine(pg_url, node="web", lease=1.5), timeout=0.5)
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://shop") as client,
    ):
        unpaid = (await client.post("/orders", json={"amount": 5})).json()["id"]
        paid = (await client.post("/orders", json={"amount": 7})).json()["id"]
        assert (await client.post(f"/orders/{paid}/pay")).json()["state"] == "PAID"
        deadline = time.monotonic() + 15
        while await _state(client, unpaid) != "EXPIRED":
            assert time.monotonic() < deadline, "the unpaid order did not expire"
            await asyncio.sleep(0.05)
        assert (await client.post(f"/orders/{unpaid}/pay")).status_code == 409
        assert await _state(client, paid) == "PAID"
        # A bad order (no amount) fails its insert: no timer was left behind either.
        with pytest.raises(Exception):  # noqa: B017 - the app's own error, raised by the transport
            await client.post("/orders", json={"amount": None})
    assert sql(pg_url, "SELECT key, state FROM wheel_timers ORDER BY state") == [
        (f"expire:{unpaid}", 2),
        (f"expire:{paid}", 3),
    ]
