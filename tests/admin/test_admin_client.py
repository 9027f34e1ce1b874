"""The synchronous admin client: its errors, and an engine in another process driven through it."""

from __future__ import annotations

import os
import signal
import socket
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from engine_process import engine_process, wait_for_line

from wheel_engine.admin import (
    AdminError,
    AdminUnavailable,
    ProtocolMismatch,
    RemoteError,
    admin_path,
    request,
)


@contextmanager
def fake_server(path: str, answer: bytes) -> Iterator[None]:
    """A socket that answers every connection with ``answer``: a peer of another version."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield
    finally:
        thread.join(timeout=10)
        listener.close()


def test_no_socket_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(AdminUnavailable, match="no admin socket"):
        request(str(tmp_path / "t.db-admin.sock"), "ping")


def test_stale_socket_is_unavailable(tmp_path: Path) -> None:
    path = str(tmp_path / "t.db-admin.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    sock.close()
    with pytest.raises(AdminUnavailable, match="stale"):
        request(path, "ping")


def test_a_file_that_is_not_a_socket_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.db-admin.sock"
    path.write_text("")
    with pytest.raises(AdminError, match="not a socket"):
        request(str(path), "ping")


def test_protocol_version_mismatch_is_named(tmp_path: Path) -> None:
    path = str(tmp_path / "s")
    answer = b'{"v": 2, "ok": true, "result": {}}\n'
    with fake_server(path, answer), pytest.raises(ProtocolMismatch, match="protocol 2"):
        request(path, "ping", timeout=10)


def test_an_answer_that_is_not_the_protocol_is_named(tmp_path: Path) -> None:
    path = str(tmp_path / "s")
    answer = b"HTTP/1.1 400 Bad Request\r\n\r\n"
    with fake_server(path, answer), pytest.raises(ProtocolMismatch, match="not a JSON line"):
        request(path, "ping", timeout=10)


def test_a_socket_of_another_owner_is_not_talked_to(tmp_path: Path) -> None:
    path = str(tmp_path / "s")
    with fake_server(path, b'{"v": 1, "ok": true, "result": {}}\n'):
        with pytest.raises(AdminError, match="not to the journal's owner"):
            request(path, "ping", owner=os.getuid() + 1)
        assert request(path, "ping", owner=os.getuid(), timeout=10) == {}


def test_admin_path_follows_symlinks(tmp_path: Path) -> None:
    (tmp_path / "real.db").write_bytes(b"")
    (tmp_path / "link.db").symlink_to(tmp_path / "real.db")
    assert admin_path(tmp_path / "link.db") == str(tmp_path / "real.db") + "-admin.sock"


@pytest.mark.slow
def test_engine_in_another_process_through_the_client(tmp_path: Path) -> None:
    journal = tmp_path / "t.db"
    sock = admin_path(journal)
    with engine_process(journal, record=("h",)) as proc:
        assert stat.S_IMODE(os.lstat(sock).st_mode) == 0o600
        assert request(sock, "ping")["pid"] == proc.pid
        later = request(sock, "schedule", handler="h", delay=3600, key="later")["timer"]
        now = request(sock, "schedule", handler="h", delay=0, key="now", payload=[1])["timer"]
        assert wait_for_line(Path(f"{journal}.fired"), f"now#{now['version']}")
        with pytest.raises(RemoteError) as refused:
            request(sock, "schedule", handler="nope", delay=0)
        assert refused.value.code == "unknown_handler"
        assert request(sock, "cancel", key="later")["result"] == "CANCELED"
        assert request(sock, "status")["stats"]["canceled"] == 1
        proc.send_signal(signal.SIGKILL)  # no close: the socket file stays behind, stale
        proc.wait()
    assert stat.S_ISSOCK(os.lstat(sock).st_mode)
    with pytest.raises(AdminUnavailable):
        request(sock, "ping")
    with engine_process(journal, record=("h",)) as second:  # replaces the stale socket
        assert request(sock, "ping")["pid"] == second.pid
        timer = request(sock, "cancel", key="later")
        assert timer["result"] == "ALREADY_DONE" and later["version"] == timer["timer"]["version"]
    assert not os.path.exists(sock)  # removed by a clean close
