"""The console in a real browser, as an operator uses it: log in, filter, open a timer's
history, dry-run then redrive a DEAD timer and see it fire; and the read-only console refusing.

Chromium (Debian's) through Playwright; the console is a real uvicorn on a loopback port over a
journal a real engine process writes. ``WHEEL_ENGINE_SCREENSHOTS=DIR`` saves the overview and a
timer's history as PNGs there (how docs/img/web-*.png are made).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import TOKEN, Served
from web_engine import HOSTILE_ERROR, MAILS, poll

from wheel_engine import web

SHOTS = os.environ.get("WHEEL_ENGINE_SCREENSHOTS")

pytestmark = pytest.mark.slow


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    p = context.new_page()
    p.set_default_timeout(10_000)
    problems: list[str] = []  # a CSP violation or a script error shows here

    def console_error(message: Any) -> None:
        # An HTTP error status (the refusals these tests provoke) is reported as a console
        # error too: those are checked by the tests themselves.
        if message.type == "error" and not message.text.startswith("Failed to load resource"):
            problems.append(message.text)

    p.on("console", console_error)
    p.on("pageerror", lambda e: problems.append(str(e)))
    try:
        yield p
        assert problems == []
    finally:
        context.close()


def _shot(page: Any, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SHOTS) / f"web-{name}.png"), full_page=True)


def test_log_in_filter_read_history_redrive_and_see_it_fire(
    seeded: Path, token_file: Path, page: Any
) -> None:
    application = web.app(str(seeded), allow_writes=True, token_file=str(token_file))
    with Served(application) as served:
        page.goto(served.url + "/")
        assert "/login" in page.url  # a token file guards every page
        page.fill("input[name=token]", "not-the-token-000000")
        page.click("button[type=submit]")
        assert page.inner_text("#message") == "wrong token"
        page.fill("input[name=token]", TOKEN)
        page.click("button[type=submit]")
        page.wait_for_selector("#handlers")
        assert page.inner_text("[data-count='states.DEAD']") == str(MAILS)

        page.click("nav >> text=Timers")
        page.select_option("select[name=state]", "DEAD")
        page.fill("input[name=handler]", "mail.send")
        page.click("#filter button[type=submit]")
        rows = page.locator("#timers tbody tr")
        assert rows.count() == MAILS
        assert "state=DEAD" in page.url and "handler=mail.send" in page.url

        page.click("#timers >> text=mail-1")
        kinds = page.locator("#history tbody tr td:nth-child(2)").all_inner_texts()
        assert kinds == ["SCHEDULE", "ATTEMPT", "DEAD"]
        assert HOSTILE_ERROR in page.inner_text("#history")  # shown as text, not run

        page.click("#redrive")
        assert "1 DEAD timer matches" in page.inner_text("#preview-count")
        assert page.locator("#history").count() == 0  # only a preview: nothing changed yet
        Path(f"{seeded}.heal").touch()
        page.click("#confirm")
        assert "redrive: 1 timer(s) back to PENDING" in page.inner_text("#message")
        fired = Path(f"{seeded}.fired")
        assert poll(lambda: fired.exists() and fired.read_text().startswith("mail-1#"))
        page.click("text=Back to the timer")
        assert poll(lambda: page.reload() and "SUCCEEDED" in page.inner_text("#fields"))
        kinds = page.locator("#history tbody tr td:nth-child(2)").all_inner_texts()
        assert kinds[-3:] == ["REDRIVE", "ATTEMPT", "ACK"]
        _shot(page, "history")
        page.click("nav >> text=Overview")
        assert page.inner_text("[data-count='states.SUCCEEDED']") == "1"
        _shot(page, "overview")


def test_the_read_only_console_offers_no_action_and_refuses_one(seeded: Path, page: Any) -> None:
    with Served(web.app(str(seeded))) as served:
        page.goto(served.url + "/timer?key=mail-2")
        assert "read-only" in page.inner_text("header .mode")
        assert page.locator("form[action*='/actions/']").count() == 0
        # A hand-made form (what a script on another tab could post) is refused too.
        page.evaluate(
            """() => { const f = document.createElement('form'); f.method = 'post';
            f.action = '/actions/redrive'; for (const [k, v] of [['key', 'mail-2'],
            ['expected', '1']]) { const i = document.createElement('input'); i.name = k;
            i.value = v; f.appendChild(i); } document.body.appendChild(f); f.submit(); }"""
        )
        page.wait_for_selector("#message")
        assert "read-only" in page.inner_text("#message")
        page.goto(served.url + "/timer?key=mail-2")
        assert "DEAD" in page.inner_text("#fields")
