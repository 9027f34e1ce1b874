"""AdminServer on a real engine (real SQLite journal) and a real Unix socket, in this process.

The client is synchronous (the CLI's): each request runs in a worker thread so the engine and
its server keep running on this loop meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from wheel_engine import Engine, Firing, PermanentError
from wheel_engine.admin import AdminError, AdminServer, RemoteError, admin_path, request
from wheel_engine.testing import VirtualClock


async def ask(path: str, command: str, **args: Any) -> dict[str, Any]:
    return await asyncio.to_thread(request, path, command, timeout=10.0, **args)


async def raw(path: str, data: bytes) -> bytes:
    """Send raw bytes, return the raw answer (for requests the client would never send)."""

    def exchange() -> bytes:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(10.0)
            sock.connect(path)
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                sock.sendall(data)
                sock.shutdown(socket.SHUT_WR)
            chunks = []
            while chunk := sock.recv(65536):
                chunks.append(chunk)
            return b"".join(chunks)

    return await asyncio.to_thread(exchange)


@contextlib.asynccontextmanager
async def serving(tmp_path: Path, **options: Any) -> AsyncIterator[tuple[Engine, AdminServer]]:
    clock = VirtualClock()
    engine = Engine(str(tmp_path / "t.db"), clock=clock)

    @engine.handler("h")
    async def h(firing: Firing) -> None:
        pass

    @engine.handler("bad")
    async def bad(firing: Firing) -> None:
        raise PermanentError("no such order")

    async with engine:
        server = AdminServer(engine, admin_path(engine.path or ""), **options)
        await server.start()
        try:
            yield engine, server
        finally:
            await server.close()


def stale_socket(path: str) -> None:
    """What a killed process leaves: a socket file that nothing accepts on any more."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    sock.close()


async def test_socket_is_owner_only_and_removed_on_close(tmp_path: Path) -> None:
    old_umask = os.umask(0)  # a permissive umask must not make the socket reachable by others
    try:
        async with serving(tmp_path) as (_, server):
            st = os.lstat(server.path)
            assert stat.S_ISSOCK(st.st_mode)
            assert stat.S_IMODE(st.st_mode) == 0o600
            assert server.path == str(tmp_path / "t.db") + "-admin.sock"
            assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".adm")] == []
    finally:
        os.umask(old_umask)
    assert not os.path.exists(server.path)


async def test_commands_go_through_the_engine(tmp_path: Path) -> None:
    async with serving(tmp_path) as (engine, server):
        path = server.path
        pong = await ask(path, "ping")
        assert pong["protocol"] == 1 and pong["pid"] == os.getpid()
        answer = await ask(path, "schedule", handler="h", delay=60, key="k", payload={"n": [1]})
        timer = answer["timer"]
        assert (timer["key"], timer["state"], timer["payload"]) == ("k", "PENDING", {"n": [1]})
        assert engine.get("k") is not None and engine.get("k").version == timer["version"]  # type: ignore[union-attr]

        assert answer["kept"] is False
        kept = await ask(path, "schedule", handler="h", delay=5, key="k", on_conflict="keep")
        assert kept["timer"]["version"] == timer["version"] and kept["kept"] is True
        # a keep with no live timer under the key schedules: the answer says so
        fresh = await ask(path, "schedule", handler="h", delay=5, key="k2", on_conflict="keep")
        assert fresh["kept"] is False and fresh["timer"]["key"] == "k2"
        # the same handler, payload and due time as the live one is still a keep
        twin = await ask(
            path, "schedule", handler="h", at=fresh["timer"]["due"], key="k2", on_conflict="keep"
        )
        assert twin["kept"] is True and twin["timer"]["version"] == fresh["timer"]["version"]
        with pytest.raises(RemoteError) as dup:
            await ask(path, "schedule", handler="h", delay=5, key="k", on_conflict="error")
        assert dup.value.code == "duplicate_key"

        stale = await ask(path, "cancel", key="k", version=timer["version"] + 1)
        assert stale["result"] == "NOT_FOUND"
        done = await ask(path, "cancel", key="k", version=timer["version"])
        assert done["result"] == "CANCELED" and done["timer"]["state"] == "CANCELED"
        assert (await ask(path, "status"))["stats"]["canceled"] == 1


async def test_redrive_and_compact_through_the_socket(tmp_path: Path) -> None:
    async with serving(tmp_path) as (engine, server):
        await engine.schedule("bad", delay=1, key="d")
        assert isinstance(engine.clock, VirtualClock)
        await engine.clock.advance(2)
        assert engine.get("d").state.value == "DEAD"  # type: ignore[union-attr]
        with pytest.raises(RemoteError) as not_found:
            await ask(server.path, "redrive", key="nope")
        assert not_found.value.code == "not_found"
        answer = await ask(server.path, "redrive", key="d", at=engine.clock.time() + 60)
        assert answer["redriven"] == 1 and answer["timers"][0]["state"] == "PENDING"
        with pytest.raises(RemoteError) as not_dead:
            await ask(server.path, "redrive", key="d")
        assert not_dead.value.code == "not_dead"
        compacted = await ask(server.path, "compact")
        assert compacted["records_after"] < compacted["records_before"]


async def test_unknown_handler_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    async with serving(tmp_path) as (engine, server):
        records = engine.stats()["journal_records"]
        with pytest.raises(RemoteError) as refused:
            await ask(server.path, "schedule", handler="os.system", delay=0, key="x")
        assert refused.value.code == "unknown_handler"
        assert "os.system" in str(refused.value)
        assert engine.get("x") is None
        assert engine.stats()["journal_records"] == records


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (b"not json\n", "malformed"),
        (b"[1, 2]\n", "malformed"),
        (b'{"v": 1, "command": "schedule", "args": NaN}\n', "malformed"),
        (b'{"v": 2, "command": "ping"}\n', "protocol_version"),
        (b'{"command": "ping"}\n', "protocol_version"),
        (b'{"v": 1, "command": "__import__"}\n', "unknown_command"),
        (b'{"v": 1, "command": "cancel", "args": "k"}\n', "malformed"),
        (b'{"v": 1, "command": "cancel", "args": {"key": "k", "eval": "1"}}\n', "invalid"),
        (b'{"v": 1, "command": "schedule", "args": {"handler": "h", "delay": true}}\n', "invalid"),
        (b'{"v": 1, "command": "cancel", "args": {"key": ["k"]}}\n', "invalid"),
        (b"\xff\xfe\n", "malformed"),
    ],
)
async def test_malformed_requests_are_answered_and_the_server_lives(
    tmp_path: Path, data: bytes, code: str
) -> None:
    async with serving(tmp_path) as (engine, server):
        answer = await raw(server.path, data)
        assert answer.endswith(b"\n") and answer.count(b"\n") == 1
        assert f'"code":"{code}"'.encode() in answer
        assert (await ask(server.path, "ping"))["protocol"] == 1
        assert engine.stats()["pending"] == 0


async def test_oversized_request_is_refused_without_harm(tmp_path: Path) -> None:
    async with serving(tmp_path, max_request_bytes=4096) as (engine, server):
        answer = await raw(server.path, b'{"v": 1, "command": "ping", "pad": "' + b"x" * 100_000)
        assert b'"code":"too_large"' in answer
        with pytest.raises(RemoteError) as big:
            await ask(server.path, "schedule", handler="h", delay=1, payload="y" * 10_000)
        assert big.value.code == "too_large"
        assert engine.stats()["pending"] == 0
        assert (await ask(server.path, "ping"))["protocol"] == 1


async def test_a_silent_client_blocks_nobody_and_close_drops_it(tmp_path: Path) -> None:
    async with serving(tmp_path, read_timeout=30.0) as (_, server):
        silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        silent.connect(server.path)  # connects, never sends
        try:
            assert (await ask(server.path, "ping"))["protocol"] == 1
            await asyncio.wait_for(server.close(), 5.0)  # does not wait out read_timeout
            assert not os.path.exists(server.path)
        finally:
            silent.close()


async def test_stale_socket_is_replaced(tmp_path: Path) -> None:
    stale_socket(str(tmp_path / "t.db-admin.sock"))
    async with serving(tmp_path) as (_, server):
        assert (await ask(server.path, "ping"))["pid"] == os.getpid()


async def test_a_live_socket_is_never_taken_over(tmp_path: Path) -> None:
    async with serving(tmp_path) as (engine, server):
        before = os.lstat(server.path).st_ino
        second = AdminServer(engine, server.path)
        with pytest.raises(AdminError, match="another process serves"):
            await second.start()
        await second.close()  # a server that never started removes nothing
        assert os.lstat(server.path).st_ino == before
        assert (await ask(server.path, "ping"))["protocol"] == 1


async def test_a_path_that_is_not_a_socket_is_left_alone(tmp_path: Path) -> None:
    target = tmp_path / "t.db-admin.sock"
    target.write_text("precious")
    engine = Engine(str(tmp_path / "t.db"), clock=VirtualClock())
    async with engine:
        with pytest.raises(AdminError, match="not a socket"):
            await AdminServer(engine, str(target)).start()
    assert target.read_text() == "precious"


async def test_close_leaves_a_socket_that_replaced_ours(tmp_path: Path) -> None:
    async with serving(tmp_path) as (_, server):
        os.unlink(server.path)
        stale_socket(server.path)  # someone else's now
        theirs = os.lstat(server.path).st_ino
    assert os.lstat(server.path).st_ino == theirs
