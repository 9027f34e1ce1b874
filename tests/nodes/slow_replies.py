"""A TCP proxy in front of PostgreSQL that holds back the server's reply to chosen statements: a
slow network, injected where it happens (between a node and its database).

Each client connection gets one thread per direction. When a chunk the client sends holds
``marker`` (the text of a statement), the next bytes the server sends on that connection are
forwarded ``delay`` seconds late; the statement itself runs (and commits) at once. Use
``sslmode=disable`` on the URL, so that statements cross the proxy in the clear.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

_CHUNK = 65536


class SlowReplies:
    def __init__(self, port: int, marker: bytes, delay: float) -> None:
        self.target = ("127.0.0.1", port)
        self.marker = marker
        self.delay = delay
        self.delayed = 0  #: replies held back so far
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._server.getsockname()[1])
        self._closed = False
        self._sockets: list[socket.socket] = [self._server]
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, url: str, port: int) -> str:
        """``url`` (on ``port``) through this proxy."""
        through = url.replace(f":{port}/", f":{self.port}/")
        return through + ("&" if "?" in through else "?") + "sslmode=disable"

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            self._sockets += [client, server]
            hold: list[float] = [0.0]  # monotonic time before which replies wait
            threading.Thread(target=self._up, args=(client, server, hold), daemon=True).start()
            threading.Thread(target=self._down, args=(server, client, hold), daemon=True).start()

    def _up(self, client: socket.socket, server: socket.socket, hold: list[float]) -> None:
        with contextlib.suppress(OSError):
            while data := client.recv(_CHUNK):
                if self.marker in data:
                    hold[0] = time.monotonic() + self.delay
                    self.delayed += 1
                server.sendall(data)
        _close(client, server)

    def _down(self, server: socket.socket, client: socket.socket, hold: list[float]) -> None:
        with contextlib.suppress(OSError):
            while data := server.recv(_CHUNK):
                wait = hold[0] - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                client.sendall(data)
        _close(client, server)

    def close(self) -> None:
        self._closed = True
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.close()


def _close(*sockets: socket.socket) -> None:
    for sock in sockets:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


@contextlib.contextmanager
def slow_replies(port: int, marker: bytes, delay: float) -> Iterator[SlowReplies]:
    proxy = SlowReplies(port, marker, delay)
    try:
        yield proxy
    finally:
        proxy.close()
