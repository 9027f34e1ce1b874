"""``AdminServer``: a running engine's admin socket, for the CLI's writing commands.

    server = AdminServer(engine, admin_path(engine.path))
    await server.start()      # after engine.start()
    ...
    await server.close()      # before engine.close()

Guarantees:

- The socket is mode 0600 from the moment anyone can reach it: it is bound inside a fresh
  private directory (``mkdtemp``: 0700), chmod-ed there, then renamed into place. No umask is
  changed (the umask is process-wide: other threads would create files under it).
- A stale socket (left by a killed process: nothing accepts on it) is replaced atomically by that
  rename. A socket some process still accepts on is never replaced nor unlinked: ``start`` raises
  :class:`~wheel_engine.admin.protocol.AdminError`. A path that is not a socket is never touched.
- ``close`` unlinks the socket only if it is still the one this server made (same inode).
- One request per connection, at most :data:`~wheel_engine.admin.protocol.MAX_REQUEST_BYTES`,
  read within :data:`READ_TIMEOUT`, its answer taken by the client within :data:`WRITE_TIMEOUT`
  (else the connection is dropped); ``close(grace)`` waits on no client beyond ``grace``. A
  malformed, oversized or slow request gets an error answer (or is dropped) and costs the server
  nothing else; a command that raises is answered with an error code, never breaks the engine or
  the server. Every request gets one answer, and it tells the truth: values JSON cannot carry
  are refused before any command runs, and an answer is encoded only after its command is done.

Not guaranteed: access control beyond the file mode. Whoever can open the socket (the engine's
user, and root) can schedule and cancel any timer of a registered handler.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import stat
import tempfile
from typing import TYPE_CHECKING, Any, Final

from journal.errors import JournalError
from wheel_engine.admin.commands import COMMAND_TABLE, plain
from wheel_engine.admin.protocol import (
    MAX_REQUEST_BYTES,
    MAX_SOCKET_PATH,
    PROTOCOL_VERSION,
    AdminError,
    ProtocolMismatch,
    RemoteError,
    decode_line,
    error_response,
    ok_response,
)
from wheel_engine.errors import DuplicateKey, EngineError, UnknownHandler

if TYPE_CHECKING:
    from wheel_engine.admin.api import EngineAPI

__all__ = ["READ_TIMEOUT", "WRITE_TIMEOUT", "AdminServer"]

logger = logging.getLogger(__name__)

#: Seconds a client has to send its request line before the connection is dropped.
READ_TIMEOUT: Final = 10.0
#: Seconds a client has to read its answer before the connection is dropped; also how long
#: ``close()`` waits for answers under way when it is given no ``grace``.
WRITE_TIMEOUT: Final = 10.0
#: Seconds to wait for an existing socket to accept, when telling a live one from a stale one.
PROBE_TIMEOUT: Final = 1.0
#: Connections the kernel queues before the server accepts them.
BACKLOG: Final = 16
#: Socket file mode: the engine's user only.
SOCKET_MODE: Final = 0o600


class AdminServer:
    """Serves ``engine``'s admin commands on the Unix socket ``path`` (see the module doc)."""

    def __init__(
        self,
        engine: EngineAPI,
        path: str | os.PathLike[str],
        *,
        max_request_bytes: int = MAX_REQUEST_BYTES,
        read_timeout: float = READ_TIMEOUT,
        write_timeout: float = WRITE_TIMEOUT,
    ) -> None:
        self.engine = engine
        self.path = os.fspath(path)
        self.max_request_bytes = max_request_bytes
        self.read_timeout = read_timeout
        self.write_timeout = write_timeout
        self._server: asyncio.AbstractServer | None = None
        self._identity: tuple[int, int] | None = None  # (st_dev, st_ino) of our socket file
        self._tasks: set[asyncio.Task[Any]] = set()  # connections being served
        self._reading: set[asyncio.Task[Any]] = set()  # ...of which still waiting for a request

    @property
    def serving(self) -> bool:
        return self._server is not None

    async def start(self) -> None:
        """Bind the socket (replacing a stale one) and start answering. Raises ``AdminError``."""
        if self._server is not None:
            raise AdminError("admin server already started")
        sock, self._identity = bind_private(self.path)
        try:
            # backlog: start_unix_server listens again, with 100 unless told (the code's word)
            self._server = await asyncio.start_unix_server(
                self._serve, sock=sock, limit=self.max_request_bytes, backlog=BACKLOG
            )
        except BaseException:
            sock.close()
            self._unlink_ours()
            raise
        logger.info("admin socket serving on %s", self.path)

    async def close(self, grace: float | None = None) -> None:
        """Stop accepting, finish the commands under way, remove the socket. Idempotent.

        Waits at most ``grace`` seconds (None: :data:`WRITE_TIMEOUT`) for the commands under
        way and their answers; a client that stops reading its answer, or a command still
        running then, is cut off (its connection aborted): a client never delays the close.
        """
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        self._unlink_ours()  # no new client finds it from here on
        for task in self._reading:  # idle or slow clients: nothing started for them
            task.cancel()
        if self._tasks:
            wait = self.write_timeout if grace is None else max(grace, 0.0)
            _, late = await asyncio.wait(set(self._tasks), timeout=wait)
            for task in late:
                task.cancel()
            if late:
                await asyncio.wait(late)  # each aborts its transport: no wait on the peer
        await server.wait_closed()
        logger.info("admin socket closed: %s", self.path)

    async def __aenter__(self) -> AdminServer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def _unlink_ours(self) -> None:
        identity, self._identity = self._identity, None
        if identity is None:
            return
        with contextlib.suppress(OSError):
            st = os.lstat(self.path)
            if (st.st_dev, st.st_ino) == identity:
                os.unlink(self.path)

    # -- one connection ---------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._reading.add(task)
        sent = False
        try:
            reply = await self._read_request(reader)
            if reply is None:  # the client closed without asking (a liveness probe)
                return
            if isinstance(reply, dict):
                self._reading.discard(task)
                reply = await self._answer(reply)
            writer.write(reply)
            # A client that does not read its answer must not hold this task (and close()).
            await asyncio.wait_for(writer.drain(), self.write_timeout)
            sent = True
        except asyncio.CancelledError:
            pass  # closing: a client that had not sent its request gets no answer
        except (ConnectionError, OSError, TimeoutError):
            pass  # the client went away before its answer, or does not read it
        finally:
            self._tasks.discard(task)
            self._reading.discard(task)
            if sent:
                writer.close()
                with contextlib.suppress(ConnectionError, OSError, TimeoutError):
                    await asyncio.wait_for(writer.wait_closed(), self.write_timeout)
            else:  # unsent bytes would make a graceful close wait on the client: drop them
                writer.transport.abort()

    async def _read_request(self, reader: asyncio.StreamReader) -> dict[str, Any] | bytes | None:
        """The request object, an error answer to send back, or None for an empty connection."""
        try:
            line = await asyncio.wait_for(reader.readline(), self.read_timeout)
        except ValueError:  # readline's own error for a line over the stream's limit
            return error_response(
                "too_large", f"request over {self.max_request_bytes} bytes: refused"
            )
        except TimeoutError:
            return error_response("timeout", f"no request line within {self.read_timeout:g}s")
        if not line.strip():
            return None
        try:
            message = decode_line(line)
        except ProtocolMismatch as exc:
            return error_response("malformed", str(exc))
        version = message.get("v")
        if type(version) is not int or version != PROTOCOL_VERSION:  # true is not 1
            return error_response(
                "protocol_version",
                f"this engine speaks admin protocol {PROTOCOL_VERSION}, the request {version!r}",
            )
        return message

    async def _answer(self, message: dict[str, Any]) -> bytes:
        command = message.get("command")
        args = message.get("args", {})
        run = COMMAND_TABLE.get(command) if isinstance(command, str) else None
        if run is None:
            return error_response("unknown_command", f"no admin command {command!r}")
        if not isinstance(args, dict):
            return error_response("malformed", "args must be a JSON object")
        try:
            result = await run(self.engine, args)
        except Exception as exc:
            code, text = refusal(exc)
            if code == "internal":
                logger.exception("admin command %s failed", command)
            return error_response(code, text)
        # Done: from here on the answer must say so. A value JSON cannot carry (a NaN in a
        # payload scheduled in-process) is sent as null rather than turned into an error.
        try:
            return ok_response(result)
        except (ValueError, TypeError, RecursionError):
            return ok_response(plain(result))


def refusal(exc: Exception) -> tuple[str, str]:
    """(code, message) for what a command raised; the message never names a Python type."""
    if isinstance(exc, RemoteError):
        return exc.code, str(exc)
    if isinstance(exc, UnknownHandler):
        return "unknown_handler", str(exc)
    if isinstance(exc, DuplicateKey):
        return "duplicate_key", str(exc)
    if isinstance(exc, ValueError | TypeError):
        return "invalid", str(exc)
    if isinstance(exc, EngineError):
        return "unavailable", str(exc)
    if isinstance(exc, JournalError):
        return "journal", str(exc)
    return "internal", "the engine failed to carry out the command (see its log)"


# -- the socket file ----------------------------------------------------------------------------


def bind_private(path: str) -> tuple[socket.socket, tuple[int, int]]:
    """A listening socket at ``path``, mode 0600 from the start; and the file's identity."""
    if len(os.fsencode(path)) > MAX_SOCKET_PATH:
        raise AdminError(
            f"admin socket path is over {MAX_SOCKET_PATH} bytes, the system's limit: {path} "
            "(put the journal in a shorter directory)"
        )
    refuse_live(path)
    directory = os.path.dirname(path) or "."
    try:
        private = tempfile.mkdtemp(prefix=".adm", dir=directory)  # 0700: ours alone
    except OSError as exc:
        raise AdminError(f"cannot create the admin socket beside the journal ({exc})") from exc
    staged = os.path.join(private, "s")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(staged)
        os.chmod(staged, SOCKET_MODE)
        sock.listen(BACKLOG)
        os.rename(staged, path)  # atomic: replaces a stale socket, never leaves a gap
        st = os.lstat(path)
    except OSError as exc:
        sock.close()
        raise AdminError(f"cannot create the admin socket {path} ({exc})") from exc
    finally:
        with contextlib.suppress(OSError):
            os.unlink(staged)  # only still there if the rename failed
        with contextlib.suppress(OSError):
            os.rmdir(private)
    sock.setblocking(False)
    return sock, (st.st_dev, st.st_ino)


def refuse_live(path: str) -> None:
    """Raise ``AdminError`` unless ``path`` is free or a stale socket (nobody accepts on it)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(st.st_mode):
        raise AdminError(f"{path} exists and is not a socket: not replacing it")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(PROBE_TIMEOUT)
    try:
        probe.connect(path)
    except (ConnectionRefusedError, FileNotFoundError):
        return  # stale: left by a process that is gone
    except OSError as exc:  # a timeout (a full backlog is a live server), a permission error
        raise AdminError(f"cannot tell whether {path} is in use ({exc}): not replacing it") from exc
    finally:
        probe.close()
    raise AdminError(f"another process serves the admin socket {path}: not replacing it")
