"""A raw admin client (tests only): any bytes out, the raw answer back."""

from __future__ import annotations

import contextlib
import socket


def exchange(path: str, data: bytes, timeout: float = 15.0) -> bytes:
    """Send ``data`` on the Unix socket ``path``, then read until the server closes.

    For requests the real client would never send. The timeout is above the server's own read
    timeout, so a request it waits on is answered (``timeout``) before this gives up."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(path)
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
        chunks = []
        with contextlib.suppress(ConnectionResetError):
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        return b"".join(chunks)
