"""``Engine(admin=True)``: the admin socket is served while the engine runs, and only then."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from wheel_engine import Engine, Firing
from wheel_engine.admin import AdminError, AdminServer, admin_path, request
from wheel_engine.testing import VirtualClock


async def ask(path: str, command: str, **args: Any) -> dict[str, Any]:
    return await asyncio.to_thread(request, path, command, timeout=10.0, **args)


def test_admin_needs_a_journal_path() -> None:
    with pytest.raises(ValueError, match="admin=True needs a journal path"):
        Engine(None, admin=True)


async def test_the_socket_is_served_from_start_to_close(tmp_path: Path) -> None:
    db = str(tmp_path / "t.db")
    engine = Engine(db, clock=VirtualClock(), admin=True)

    @engine.handler("h")
    async def h(firing: Firing) -> None:
        pass

    sock = admin_path(db)
    assert not os.path.exists(sock)
    async with engine:
        assert (await ask(sock, "ping"))["pid"] == os.getpid()
        answer = await ask(sock, "schedule", handler="h", delay=3600, key="k")
        assert answer["timer"]["key"] == "k" and engine.get("k") is not None
    assert not os.path.exists(sock)  # closed before the engine stopped taking work


async def test_without_admin_no_socket(tmp_path: Path) -> None:
    db = str(tmp_path / "t.db")
    async with Engine(db, clock=VirtualClock()):
        assert not os.path.exists(admin_path(db))


async def test_a_socket_already_served_fails_start_and_leaves_the_journal_free(
    tmp_path: Path,
) -> None:
    db = str(tmp_path / "t.db")
    other = Engine(str(tmp_path / "other.db"), clock=VirtualClock())
    async with other, AdminServer(other, admin_path(db)):  # someone serves that socket
        engine = Engine(db, clock=VirtualClock(), admin=True)
        with pytest.raises(AdminError):
            await engine.start()
        async with Engine(db, clock=VirtualClock()):  # the failed start closed its journal
            pass
