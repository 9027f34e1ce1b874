"""The console over PostgreSQL: counts, the nodes page (partitions, epochs, lease ages), a
keyset page, and a redrive that every node sees, against an engine running on the database."""

from __future__ import annotations

import asyncio
import time

from starlette.testclient import TestClient

from wheel_engine import Engine, Firing, PermanentError
from wheel_engine.web.config import ConfigError

TOKEN = "pg-token-0123456789abcdef"


async def _until(condition: object, patience: float = 15.0) -> None:
    deadline = time.monotonic() + patience
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


async def test_postgres_overview_nodes_and_redrive(pg_url: str) -> None:
    from wheel_engine import web

    engine = Engine(pg_url, node="node-<b>a</b>", lease=5.0, horizon=60.0)
    fired: list[str] = []
    healed: list[bool] = []

    async def fail(firing: Firing) -> None:
        if not healed:
            raise PermanentError("downstream said <script>x</script>")
        fired.append(firing.key)

    async def nothing(firing: Firing) -> None:
        pass

    engine.register("pay.fail", fail)
    engine.register("pay.later", nothing)
    async with engine:
        await engine.schedule("pay.fail", key="p-dead", delay=0.0, payload={"secret": "S3CR3T"})
        for n in range(5):
            await engine.schedule("pay.later", key=f"p-{n}", delay=120.0 + n * 3600.0)
        await _until(lambda: (engine.get("p-dead") or engine.get("p-0")) is not None
                     and str(getattr(engine.get("p-dead"), "state", "")) == "DEAD")  # fmt: skip
        application = web.app(pg_url, allow_writes=True, tokens={TOKEN: "ops"})
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        with TestClient(application) as c:
            data = c.get("/api/overview", headers=bearer).json()
            assert data["states"]["DEAD"] == 1 and data["states"]["PENDING"] == 5
            assert sum(data["due"]["next_hour"]) == 1 and sum(data["due"]["next_day"]) == 5
            assert data["dead"][0]["error"].endswith("<script>x</script>")
            nodes = c.get("/api/nodes", headers=bearer).json()
            assert [n["node"] for n in nodes["nodes"]] == ["node-<b>a</b>"]
            held = [p for p in nodes["partitions"] if p["held"]]
            assert held and all(p["owner"] == "node-<b>a</b>" and p["epoch"] >= 1 for p in held)
            assert all(p["lease_age"] >= 0 and p["lease_left"] > 0 for p in held)
            html = c.get("/nodes", headers=bearer).text
            assert "node-&lt;b&gt;a&lt;/b&gt;" in html and "<b>a</b>" not in html
            assert "S3CR3T" not in c.get("/timer?key=p-dead", headers=bearer).text
            page = c.get("/api/timers", params={"limit": 2}, headers=bearer).json()
            more = c.get("/api/timers", params={"after": page["next_after"]}, headers=bearer)
            keys = [t["key"] for t in page["timers"]] + [t["key"] for t in more.json()["timers"]]
            assert keys == sorted(keys) and len(keys) == 6
            preview = c.post("/api/redrive/preview", json={"prefix": "p-"}, headers=bearer)
            assert preview.json()["count"] == 1
            healed.append(True)
            r = c.post("/api/redrive", json={"prefix": "p-", "expected": 1}, headers=bearer)
            assert r.status_code == 200 and r.json()["count"] == 1
            r = c.post("/api/cancel", json={"key": "p-1"}, headers=bearer)
            assert r.json()["detail"] == "CANCELED"
            r = c.post("/api/run-now", json={"key": "p-0"}, headers=bearer)
            assert r.status_code == 200, r.text

            def state(key: str) -> str:
                return str(c.get("/api/timer", params={"key": key}, headers=bearer).json()
                           ["timer"]["state"])  # fmt: skip

            await _until(lambda: state("p-0") == "SUCCEEDED")
            assert state("p-1") == "CANCELED"
        await _until(lambda: fired == ["p-dead"])


def test_postgres_writes_need_a_token(pg_url: str) -> None:
    from wheel_engine import web

    try:
        web.app(pg_url, allow_writes=True)
    except ConfigError as exc:
        assert "token" in str(exc)
    else:
        raise AssertionError("allow_writes without a token was accepted")


async def test_the_postgres_overview_is_served_from_a_cache_recounted_behind(pg_url: str) -> None:
    import psycopg

    from wheel_engine.web.pg_overview import CachedOverview

    async def nothing(firing: Firing) -> None:
        pass

    engine = Engine(pg_url, node="a", lease=5.0, horizon=60.0)
    engine.register("h", nothing)
    async with engine:
        await engine.schedule("h", key="one", delay=600.0)
        cache = CachedOverview(pg_url, max_age=0.0)
        with psycopg.connect(pg_url, autocommit=True) as conn:
            first = cache.get(conn)
            assert first["states"]["PENDING"] == 1 and sum(first["due"]["next_hour"]) == 1
            await engine.schedule("h", key="two", delay=7200.0)
            stale = cache.get(conn)  # answers at once with what it has, and recounts behind
            assert stale["states"]["PENDING"] == 1
            await _until(lambda: cache.get(conn)["states"]["PENDING"] == 2)
            fresh = cache.get(conn)
            assert sum(fresh["due"]["next_hour"]) == 1 and sum(fresh["due"]["next_day"]) == 2
