"""The console over HTTP (Starlette's TestClient), against a journal a real engine process wrote:
headers, escaping, payload hiding, auth, CSRF, read-only refusal, the dry run's count, paging."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import TOKEN
from starlette.testclient import TestClient
from web_engine import HOSTILE_ERROR, HOSTILE_KEY, MAILS, ORDERS, SECRET, poll

from wheel_engine import web
from wheel_engine.web.security import HEADERS

BEARER = {"Authorization": f"Bearer {TOKEN}"}
PAGES = ("/", "/timers", "/timers?state=DEAD", f"/timer?key={HOSTILE_KEY}", "/timer?key=mail-1")


@pytest.fixture
def client(seeded: Path) -> Iterator[TestClient]:
    with TestClient(web.app(str(seeded))) as c:
        yield c


@pytest.fixture
def writer(seeded: Path, token_file: Path) -> Iterator[TestClient]:
    application = web.app(str(seeded), allow_writes=True, token_file=str(token_file))
    with TestClient(application) as c:
        yield c


def _login(c: TestClient) -> str:
    """Log in through the form; the CSRF token the next page's forms carry."""
    r = c.post("/login", data={"token": TOKEN, "next": "/"}, follow_redirects=False)
    assert r.status_code == 303 and "wheel_session" in r.headers["set-cookie"]
    assert "httponly" in r.headers["set-cookie"].lower()
    assert "samesite=strict" in r.headers["set-cookie"].lower()
    page = c.get("/timer", params={"key": "mail-1"}).text
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found is not None
    return found.group(1)


def test_every_response_has_the_strict_headers_and_no_cors(client: TestClient) -> None:
    for path in (*PAGES, "/api/overview", "/static/style.css", "/nowhere", "/api/nowhere"):
        r = client.get(path, headers={"Origin": "https://evil.example"})
        for name, value in HEADERS.items():
            assert r.headers.get(name) == value, (path, name)
        assert "frame-ancestors 'none'" in r.headers["content-security-policy"]
        assert not any(h.lower().startswith("access-control-") for h in r.headers), path
    r = client.options("/api/overview", headers={"Origin": "https://evil.example"})
    assert "access-control-allow-origin" not in r.headers


def test_keys_and_errors_holding_script_are_shown_as_text(client: TestClient) -> None:
    for path in PAGES:
        html = client.get(path).text
        assert "<script>alert" not in html, path
        assert "</script>" not in html.replace("defer></script>", ""), path
    assert "&lt;script&gt;alert(&#34;e&#34;)" in client.get("/timer?key=mail-1").text
    assert "order-&lt;script&gt;" in client.get("/timers").text
    # The API is JSON: the same text, as data.
    assert client.get("/api/timer", params={"key": "mail-1"}).json()["timer"]["last_error"] == (
        f"PermanentError: {HOSTILE_ERROR}"
    )


def test_payloads_are_hidden_unless_asked_for(seeded: Path, client: TestClient) -> None:
    for path in (*PAGES, "/timer?key=order-1"):
        assert SECRET not in client.get(path).text, path
    for path in ("/api/timers", "/api/timer?key=order-1", "/api/overview"):
        assert SECRET not in client.get(path).text, path
    data = client.get("/api/timer", params={"key": "order-1"}).json()
    assert data["timer"]["payload_hidden"] is True and "payload" not in data["timer"]
    assert all("payload" not in h for h in data["history"])
    with TestClient(web.app(str(seeded), show_payloads=True)) as shown:
        data = shown.get("/api/timer", params={"key": "order-1"}).json()
        assert data["timer"]["payload"] == {"order": 1, "card": SECRET}
        assert SECRET in shown.get("/timer?key=order-1").text


def test_overview_counts_and_chart(client: TestClient) -> None:
    data = client.get("/api/overview").json()
    assert data["states"]["DEAD"] == MAILS and data["states"]["PENDING"] == ORDERS + 1
    assert data["handlers"]["mail.send"]["DEAD"] == MAILS
    assert sum(data["due"]["next_hour"]) == 2  # the hostile key and order-1, 10 and 50 min
    assert sum(data["due"]["next_day"]) == ORDERS + 1  # the last, order-30, is 20h10m away
    assert data["dead"] == [
        {"handler": "mail.send", "error": f"PermanentError: {HOSTILE_ERROR}", "count": MAILS}
    ]
    html = client.get("/").text
    assert html.count('<rect class="bar"') == 12 + 24 and "<svg" in html


def test_timers_are_paged_by_key_with_filters(client: TestClient) -> None:
    seen: list[str] = []
    params: dict[str, Any] = {"limit": 7}
    while True:
        page = client.get("/api/timers", params=params).json()
        seen += [t["key"] for t in page["timers"]]
        if page["next_after"] is None:
            break
        params["after"] = page["next_after"]
    assert seen == sorted(seen) and len(seen) == len(set(seen)) == ORDERS + 1 + MAILS
    dead = client.get("/api/timers", params={"state": "dead", "handler": "mail.send"}).json()
    assert [t["key"] for t in dead["timers"]] == [f"mail-{n}" for n in range(1, MAILS + 1)]
    prefixed = client.get("/api/timers", params={"prefix": "order-2"}).json()["timers"]
    assert {t["key"] for t in prefixed} == {"order-2", *(f"order-2{n}" for n in range(10))}
    assert client.get("/api/timers", params={"state": "NOPE"}).status_code == 400


def test_history_shows_every_record_of_the_key(client: TestClient) -> None:
    history = client.get("/api/timer", params={"key": "mail-1"}).json()["history"]
    assert [h["kind"] for h in history] == ["SCHEDULE", "ATTEMPT", "DEAD"]
    assert client.get("/api/timer", params={"key": "no-such"}).status_code == 404


def test_read_only_console_refuses_every_write(client: TestClient) -> None:
    for path in ("/actions/redrive/preview", "/actions/redrive", "/actions/cancel",
                 "/actions/run-now"):  # fmt: skip
        r = client.post(path, data={"key": "mail-1", "expected": "1"})
        assert r.status_code == 403 and "read-only" in r.text
    for path in ("/api/redrive", "/api/cancel", "/api/run-now"):
        assert client.post(path, json={"key": "mail-1"}, headers=BEARER).status_code == 403
    assert 'action="/actions/' not in client.get("/timer?key=mail-1").text
    assert client.get("/api/timer?key=mail-1").json()["timer"]["state"] == "DEAD"


def test_a_token_file_guards_every_page_and_the_api(writer: TestClient) -> None:
    r = writer.get("/timers?state=DEAD", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].startswith("/login?next=")
    assert writer.get("/api/overview").status_code == 401
    assert writer.get("/api/overview", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert writer.get("/api/overview", headers=BEARER).status_code == 200
    r = writer.post("/login", data={"token": "wrong-token-000000", "next": "/"})
    assert r.status_code == 401 and "wheel_session" not in r.headers.get("set-cookie", "")
    r = writer.post("/login", data={"token": TOKEN, "next": "//evil.example/"},
                    follow_redirects=False)  # fmt: skip
    assert r.headers["location"] == "/"  # never off-site
    assert writer.get("/", follow_redirects=False).status_code == 200


def test_writes_by_cookie_need_the_csrf_token(writer: TestClient) -> None:
    csrf = _login(writer)
    for sent in ({}, {"csrf": "forged"}):
        r = writer.post("/actions/cancel", data={"key": "order-5", **sent})
        assert r.status_code == 403 and "CSRF" in r.text
    r = writer.post("/actions/cancel", data={"key": "order-5", "csrf": csrf},
                    headers={"Origin": "https://evil.example"})  # fmt: skip
    assert r.status_code == 403
    assert writer.get("/api/timer?key=order-5").json()["timer"]["state"] == "PENDING"
    r = writer.post("/actions/cancel", data={"key": "order-5", "csrf": csrf})
    assert r.status_code == 200 and "CANCELED" in r.text
    assert poll(lambda: writer.get("/api/timer?key=order-5").json()["timer"]["state"] == "CANCELED")


def test_redrive_needs_the_dry_runs_count_and_fires(seeded: Path, writer: TestClient) -> None:
    preview = writer.post("/api/redrive/preview", json={"handler": "mail.send"}, headers=BEARER)
    assert preview.json()["count"] == MAILS
    r = writer.post("/api/redrive", json={"handler": "mail.send", "expected": 1}, headers=BEARER)
    assert r.status_code == 409 and "preview again" in r.json()["error"]
    assert writer.get("/api/overview", headers=BEARER).json()["states"]["DEAD"] == MAILS
    Path(f"{seeded}.heal").touch()
    r = writer.post(
        "/api/redrive", json={"handler": "mail.send", "expected": MAILS}, headers=BEARER
    )
    assert r.status_code == 200 and r.json()["count"] == MAILS
    fired = Path(f"{seeded}.fired")
    assert poll(lambda: fired.exists() and len(fired.read_text().splitlines()) == MAILS)
    states = writer.get("/api/overview", headers=BEARER).json()["states"]
    assert poll(
        lambda: writer.get("/api/overview", headers=BEARER).json()["states"]["SUCCEEDED"] == MAILS
    ), states


def test_run_now_reschedules_a_pending_timer_due_now(seeded: Path, writer: TestClient) -> None:
    before = writer.get("/api/timer?key=order-3", headers=BEARER).json()["timer"]
    r = writer.post("/api/run-now", json={"key": "order-3"}, headers=BEARER)
    assert r.status_code == 200, r.text
    fired = Path(f"{seeded}.fired")
    assert poll(lambda: fired.exists() and "order-3#" in fired.read_text())
    after = writer.get("/api/timer?key=order-3", headers=BEARER).json()["timer"]
    assert after["version"] > before["version"] and after["handler"] == "orders.expire"


def test_the_audit_log_says_who_what_and_how_many_without_payloads(
    writer: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="wheel_engine.web.audit")
    writer.post("/api/cancel", json={"key": "order-7"}, headers=BEARER)
    writer.post("/api/redrive", json={"key": "mail-2", "expected": 1}, headers=BEARER)
    lines = [r.getMessage() for r in caplog.records if r.name == "wheel_engine.web.audit"]
    assert any("who=alice action=cancel key='order-7' result=CANCELED" in m for m in lines)
    assert any("who=alice action=redrive key='mail-2' count=1" in m for m in lines)
    assert not any(SECRET in m for m in lines)


def test_a_host_name_not_the_consoles_is_refused(seeded: Path) -> None:
    hosts = frozenset({"127.0.0.1:8740", "localhost:8740"})
    application = web.app(str(seeded), allowed_hosts=hosts)
    with TestClient(application, base_url="http://127.0.0.1:8740") as c:
        assert c.get("/").status_code == 200
        assert c.get("/", headers={"Host": "rebound.example:8740"}).status_code == 421


def test_login_attempts_are_rate_limited(writer: TestClient) -> None:
    statuses = [
        writer.post("/login", data={"token": f"guess-{n:016d}"}).status_code for n in range(8)
    ]
    assert statuses[0] == 401 and statuses[-1] == 429


def test_the_overview_shows_the_running_engines_own_lateness(client: TestClient) -> None:
    engine = client.get("/api/overview").json()["engine"]
    assert engine is not None and engine["fired"] >= MAILS and engine["dead"] == MAILS
    assert engine["lag_p99"] >= 0.0
    assert "The running engine (pid" in client.get("/").text


def test_mounted_under_a_path_every_link_stays_under_it(seeded: Path, token_file: Path) -> None:
    from starlette.applications import Starlette
    from starlette.routing import Mount

    console = web.app(str(seeded), allow_writes=True, token_file=str(token_file))
    service = Starlette(routes=[Mount("/ops/timers", app=console)])
    with TestClient(service) as c:
        r = c.get("/ops/timers/timers?state=DEAD", follow_redirects=False)
        assert r.headers["location"] == "/ops/timers/login?next=/timers%3Fstate%3DDEAD"
        r = c.post("/ops/timers/login", data={"token": TOKEN, "next": "/timers?state=DEAD"},
                   follow_redirects=False)  # fmt: skip
        assert r.headers["location"] == "/ops/timers/timers?state=DEAD"
        r = c.post("/ops/timers/login", data={"token": TOKEN, "next": "/timer?key=mail-1"},
                   follow_redirects=False)  # fmt: skip
        assert r.headers["location"] == "/ops/timers/timer?key=mail-1"
        assert "Path=/ops/timers" in r.headers["set-cookie"]
        html = c.get("/ops/timers/timer", params={"key": "mail-1"}).text
        links = re.findall(r'(?:href|action|src)="(/[^"]*)"', html)
        assert links and all(link.startswith("/ops/timers/") for link in links), links
        assert c.get("/ops/timers/static/style.css").status_code == 200
