"""Fixtures of the console's tests: a journal written by a real engine process, the console
served by a real uvicorn on a free loopback port, and a real browser (Debian's chromium driven
by Playwright).

Without chromium or playwright the browser tests skip with one line;
``WHEEL_ENGINE_REQUIRE_BROWSER=1`` (set by CI) makes that a failure instead. The web extra
itself (starlette, jinja2, uvicorn) is a dev dependency: without it this folder skips.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from web_engine import MAILS, engine_process, poll

try:
    import jinja2  # noqa: F401
    import starlette
    import uvicorn  # noqa: F401
except ImportError:  # the web extra is missing: nothing here can run (one line, not errors)
    collect_ignore_glob = ["test_*.py"]
else:
    with warnings.catch_warnings():  # its TestClient says it prefers another HTTP client
        warnings.simplefilter("ignore")
        import starlette.testclient  # noqa: F401

REQUIRE_BROWSER = os.environ.get("WHEEL_ENGINE_REQUIRE_BROWSER") == "1"
CHROMIUM = (
    os.environ.get("WHEEL_ENGINE_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
)
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
TOKEN = "alice-token-0123456789abcdef"


def dead_count(journal: Path) -> int:
    from wheel_engine.web.view import JournalView

    view = JournalView(str(journal))
    try:
        state = view.read()
        return sum(n for (_h, s), n in state.counts.items() if s == "DEAD")
    finally:
        view.close()


@pytest.fixture
def seeded(tmp_path: Path) -> Iterator[Path]:
    """A journal a live engine process wrote (and serves its admin socket on): its mails DEAD."""
    journal = tmp_path / "timers.db"
    with engine_process(journal):
        assert poll(lambda: journal.exists() and dead_count(journal) == MAILS), "no DEAD mails"
        yield journal


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "tokens"
    path.write_text(f"# who token\nalice {TOKEN}\n")
    path.chmod(0o600)
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Served:
    """A console app served by uvicorn in a thread of this process."""

    def __init__(self, application: Any) -> None:
        import uvicorn

        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(application, host="127.0.0.1", port=self.port, log_level="error")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> Served:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            assert time.monotonic() < deadline, "the console did not start"
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=20)


def _unavailable(reason: str) -> None:
    if REQUIRE_BROWSER:
        pytest.fail(f"WHEEL_ENGINE_REQUIRE_BROWSER=1 but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's chromium, headless, through Playwright (it cannot download its own here).

    Module-scoped, not session-scoped: Playwright's sync API keeps an event loop running in
    this thread while it is open, and the suite's ``async def`` tests need ``asyncio.run``.
    """
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed (pip install playwright)")
    if not os.access(CHROMIUM, os.X_OK):
        _unavailable(f"no chromium at {CHROMIUM} (apt-get install chromium)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()
