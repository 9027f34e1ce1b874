"""A synchronous admin client: one request, one answer, for the CLI and for scripts.

    from wheel_engine.admin import admin_path, request
    timer = request(admin_path("timers.db"), "schedule", handler="orders.expire", delay=60)

Errors, each one line a person can act on:

- :class:`AdminUnavailable`: no socket there, or a stale one nobody accepts on (no engine with
  ``admin=True`` runs on that journal). The caller may then open the journal itself.
- :class:`ProtocolMismatch`: the engine speaks another protocol version (upgrade one side), or
  the peer is not an admin server at all.
- :class:`RemoteError`: the engine refused the request; ``code`` says why (``unknown_handler``,
  ``invalid``, ``duplicate_key``, ``not_found``, ``not_dead``, ...).
- :class:`AdminError`: anything else (permission denied, no answer in time).
"""

from __future__ import annotations

import os
import socket
import stat
import time
from typing import Any, Final

from wheel_engine.admin.protocol import (
    PROTOCOL_VERSION,
    AdminError,
    AdminUnavailable,
    ProtocolMismatch,
    RemoteError,
    decode_line,
    request_line,
)

__all__ = ["DEFAULT_TIMEOUT", "request"]

#: Seconds to wait for an answer; a compaction of a big journal may need more (pass timeout=).
DEFAULT_TIMEOUT: Final = 60.0
#: The largest answer read (a redrive of every dead timer lists them all).
MAX_RESPONSE_BYTES: Final = 256 * 1024 * 1024
_CHUNK: Final = 65536
#: Back-off between connection attempts while the engine's listen backlog is full (seconds).
_FIRST_RETRY: Final = 0.005
_LAST_RETRY: Final = 0.1
#: A socket timeout is never set to zero (that would make the socket non-blocking).
_MIN_WAIT: Final = 0.001


def request(
    sock_path: str | os.PathLike[str],
    command: str,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    owner: int | None = None,
    **args: Any,
) -> dict[str, Any]:
    """Send ``command`` with ``args`` to the engine at ``sock_path``; return its result.

    ``owner``: the uid the socket must belong to (the journal's owner, say); a socket owned by
    anyone else is refused before anything is sent to it.
    """
    path = os.fspath(sock_path)
    deadline = time.monotonic() + timeout
    _check_socket_file(path, owner)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        _connect(sock, path, deadline)
        sock.settimeout(max(deadline - time.monotonic(), _MIN_WAIT))
        try:
            sock.sendall(request_line(command, args))
            sock.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered early (a request it refused): read that answer
        except TimeoutError:
            raise AdminError(
                f"{path}: the engine did not take the request in {timeout:g}s"
            ) from None
        line = _read_line(sock, path, timeout)
    return _result(decode_line(line), path)


def _check_socket_file(path: str, owner: int | None) -> None:
    """The checks the server makes of what is at its path, and the owner's: ``lstat``, so a
    symbolic link planted there (to another service's socket, say) is refused, never followed."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise AdminUnavailable(f"no admin socket at {path}") from None
    except OSError as exc:
        raise AdminError(f"{path}: {exc.strerror or exc}") from None
    if stat.S_ISLNK(st.st_mode):
        raise AdminError(f"{path} is a symbolic link, not the engine's socket: not following it")
    if not stat.S_ISSOCK(st.st_mode):
        raise AdminError(f"{path} is not a socket")
    if owner is not None and st.st_uid != owner:
        raise AdminError(
            f"{path} belongs to uid {st.st_uid}, not to the journal's owner (uid {owner}): "
            "not talking to it"
        )


def _connect(sock: socket.socket, path: str, deadline: float) -> None:
    """Connect by ``deadline``. A Unix socket whose listen backlog is full refuses a
    non-blocking connect with EAGAIN at once (it never waits as TCP does): that is a busy
    engine, not a missing one, so try again, backing off, until the caller's own timeout."""
    sock.setblocking(False)
    wait = _FIRST_RETRY
    while True:
        try:
            sock.connect(path)
            return
        except (FileNotFoundError, ConnectionRefusedError):
            raise AdminUnavailable(
                f"no engine answers on {path} (a stale socket left by a process that is gone)"
            ) from None
        except PermissionError:
            raise AdminError(
                f"{path}: permission denied (the socket is its engine's user's only, mode 0600): "
                "run as that user"
            ) from None
        except BlockingIOError:  # EAGAIN: the backlog is full
            left = deadline - time.monotonic()
            if left <= 0:
                raise AdminError(
                    f"{path}: the engine did not accept the connection in time (its queue of "
                    "connections stayed full)"
                ) from None
            time.sleep(min(wait, left))
            wait = min(wait * 2, _LAST_RETRY)


def _read_line(sock: socket.socket, path: str, timeout: float) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        try:
            chunk = sock.recv(_CHUNK)
        except TimeoutError:
            raise AdminError(f"{path}: no answer from the engine in {timeout:g}s") from None
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        if chunk.endswith(b"\n") or size > MAX_RESPONSE_BYTES:
            break
    if not chunks:
        raise AdminError(f"{path}: the engine closed the connection without an answer")
    return b"".join(chunks)


def _result(message: dict[str, Any], path: str) -> dict[str, Any]:
    if message.get("v") != PROTOCOL_VERSION:
        raise ProtocolMismatch(
            f"{path}: the engine speaks admin protocol {message.get('v')!r}, this client "
            f"{PROTOCOL_VERSION}: use the same wheel-engine version on both sides"
        )
    if message.get("ok") is True:
        result = message.get("result")
        if not isinstance(result, dict):
            raise ProtocolMismatch(f"{path}: an answer without a result object")
        return result
    error = message.get("error")
    if not isinstance(error, dict):
        raise ProtocolMismatch(f"{path}: an error answer without an error object")
    code, text = str(error.get("code", "error")), str(error.get("message", ""))
    if code == "protocol_version":
        raise ProtocolMismatch(f"{path}: {text}")
    raise RemoteError(code, text)
