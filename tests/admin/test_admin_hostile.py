"""Admin clients that misbehave (SPEC guarantee 11: "Hostile files and clients").

A client that never reads its answer, a full listen backlog, requests JSON cannot answer
(deep nesting, infinities, wrong types, unknown arguments), and random and adversarial requests
thrown at a live engine's socket while its timers fire.
"""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from engine_process import engine_process
from raw_client import exchange
from test_admin_server import serving

from wheel_engine import Engine, Firing
from wheel_engine.admin import admin_path, request
from wheel_engine.admin.protocol import MAX_NESTING, ProtocolMismatch, decode_line
from wheel_engine.admin.server import BACKLOG
from wheel_engine.testing import VirtualClock


async def raw(path: str, data: bytes) -> dict[str, Any]:
    answer = await asyncio.to_thread(exchange, path, data)
    assert answer.endswith(b"\n") and answer.count(b"\n") == 1, answer[:200]
    message = json.loads(answer)
    assert isinstance(message, dict)
    return message


def line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


# -- item 3: a client that never reads its answer -------------------------------------------------

#: A string of control characters: each is sent as the 6 bytes ``\\u0001`` in JSON, so the answer
#: (which echoes the payload) is ~360 KB, more than a Unix socket buffers for a reader that waits.
BIG_ANSWER = "\x01" * 60_000


def never_reads(path: str, data: bytes, release: threading.Event) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(path)
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        release.wait(30.0)  # never reads: the answer stays stuck in the server's buffer


async def test_client_that_never_reads_does_not_delay_close_beyond_grace(tmp_path: Path) -> None:
    engine = Engine(str(tmp_path / "t.db"), clock=VirtualClock(), admin=True)

    @engine.handler("h")
    async def h(firing: Firing) -> None:
        pass

    await engine.start()
    release = threading.Event()
    request_line = line(
        {
            "v": 1,
            "command": "schedule",
            "args": {"handler": "h", "delay": 60, "payload": BIG_ANSWER},
        }
    )
    client = threading.Thread(
        target=never_reads, args=(admin_path(engine.path or ""), request_line, release)
    )
    client.start()
    try:
        deadline = time.monotonic() + 10.0
        while not engine.timers():  # the request was served: its answer is being written
            assert time.monotonic() < deadline, "the request was never served"
            await asyncio.sleep(0.01)
        started = time.monotonic()
        await asyncio.wait_for(engine.close(grace=0.5), 10.0)
        assert time.monotonic() - started < 3.0
    finally:
        release.set()
        client.join()
        await engine.close(grace=0.0)


async def test_answer_not_read_in_write_timeout_is_dropped(tmp_path: Path) -> None:
    async with serving(tmp_path, write_timeout=0.2) as (engine, server):
        release = threading.Event()
        request_line = line(
            {
                "v": 1,
                "command": "schedule",
                "args": {"handler": "h", "delay": 60, "payload": BIG_ANSWER},
            }
        )
        client = threading.Thread(target=never_reads, args=(server.path, request_line, release))
        client.start()
        try:
            deadline = time.monotonic() + 10.0
            while not engine.timers() or server._tasks:  # served, then dropped
                assert time.monotonic() < deadline, "the connection was never dropped"
                await asyncio.sleep(0.01)
        finally:
            release.set()
            await asyncio.to_thread(client.join)


# -- item 4: a full listen backlog ----------------------------------------------------------------


def fill_backlog(path: str) -> list[socket.socket]:
    """Connect without being accepted until the kernel's queue is full (the server is stopped)."""
    queued: list[socket.socket] = []
    while len(queued) < 1000:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            sock.connect(path)
        except BlockingIOError:
            sock.close()
            return queued
        queued.append(sock)
    raise AssertionError("the backlog never filled")


@pytest.mark.slow
def test_full_backlog_is_waited_out_and_the_backlog_is_the_codes(tmp_path: Path) -> None:
    journal = tmp_path / "t.db"
    with engine_process(journal) as proc:
        path = admin_path(journal)
        proc.send_signal(signal.SIGSTOP)  # the engine accepts nothing while stopped
        queued: list[socket.socket] = []
        try:
            queued = fill_backlog(path)
            assert len(queued) == BACKLOG + 1  # Linux queues backlog + 1: 16, not asyncio's 100
            started = time.monotonic()
            with pytest.raises(Exception, match="did not accept the connection in time"):
                request(path, "ping", timeout=0.5)
            assert time.monotonic() - started >= 0.45  # waited for its timeout, not 0 s
            answers: list[dict[str, Any]] = []
            asker = threading.Thread(
                target=lambda: answers.append(request(path, "ping", timeout=10))
            )
            asker.start()
            time.sleep(0.3)  # the client is retrying against the full queue meanwhile
            for sock in queued:
                sock.close()
            proc.send_signal(signal.SIGCONT)
            asker.join()
            assert answers and answers[0]["pid"] == proc.pid
        finally:
            proc.send_signal(signal.SIGCONT)
            for sock in queued:
                sock.close()


# -- item 5: malformed requests --------------------------------------------------------------------


async def test_deep_nesting_is_answered(tmp_path: Path) -> None:
    async with serving(tmp_path) as (_, server):
        deep = b'{"v": 1, "command": "ping", "args": {"x": ' + b"[" * 5000 + b"]" * 5000 + b"}}\n"
        answer = await raw(server.path, deep)
        assert answer["ok"] is False and answer["error"]["code"] == "malformed"


def test_the_protocol_sets_its_own_nesting_limit() -> None:
    """Deep nesting is refused by the protocol's own limit, not the parser's (which Python 3.11
    hits at a depth 3.13 parses): the same request gets the same answer on every version."""

    def nested(depth: int) -> bytes:  # the message object is level 1, "args" level 2
        inner = depth - 2
        return b'{"v": 1, "command": "ping", "args": {"x": ' + b"[" * inner + b"]" * inner + b"}}"

    assert decode_line(nested(MAX_NESTING))["command"] == "ping"
    with pytest.raises(ProtocolMismatch, match="nested deeper than"):
        decode_line(nested(MAX_NESTING + 1))
    with pytest.raises(ProtocolMismatch):
        decode_line(nested(3000))


@pytest.mark.parametrize("number", ["1e999", "-1e999", "NaN", "Infinity"])
async def test_non_finite_numbers_are_refused_before_anything_is_written(
    tmp_path: Path, number: str
) -> None:
    async with serving(tmp_path) as (engine, server):
        data = (
            '{"v": 1, "command": "schedule", "args": {"handler": "h", "delay": 60, '
            f'"key": "k", "payload": {{"x": {number}}}}}}}\n'
        ).encode()
        answer = await raw(server.path, data)
        assert answer["ok"] is False and answer["error"]["code"] == "malformed"
        await engine.journal.flush()  # type: ignore[union-attr]
        assert engine.get("k") is None and engine.journal.last_seq == 0  # type: ignore[union-attr]


async def test_answer_tells_the_truth_when_the_timer_holds_an_infinity(tmp_path: Path) -> None:
    async with serving(tmp_path) as (engine, server):
        await engine.schedule("h", delay=60, key="k", payload={"x": float("inf")})  # in-process
        answer = await raw(server.path, line({"v": 1, "command": "cancel", "args": {"key": "k"}}))
        assert answer["ok"] is True, answer  # it was cancelled: the answer must say so
        assert answer["result"]["result"] == "CANCELED"
        assert answer["result"]["timer"]["payload"] == {"x": None}
        assert engine.get("k").state.value == "CANCELED"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "message",
    [
        {"v": True, "command": "ping"},
        {"v": 1.0, "command": "ping"},
        {"v": 1, "command": "ping", "args": {"verbose": 1}},
        {"v": 1, "command": "status", "args": {"x": None}},
        {"v": 1, "command": "schedule", "args": {"handler": "h", "delay": True}},
        {"v": 1, "command": "cancel", "args": {"key": "k", "version": True}},
    ],
)
async def test_wrong_types_and_unknown_arguments_are_refused(
    tmp_path: Path, message: dict[str, Any]
) -> None:
    async with serving(tmp_path) as (engine, server):
        answer = await raw(server.path, line(message))
        assert answer["ok"] is False
        assert answer["error"]["code"] in ("protocol_version", "invalid")
        assert not engine.timers()
