"""The admin channel's wire format: one JSON line each way, one request per connection.

A request is one line of UTF-8 JSON, an object::

    {"v": 1, "command": "schedule", "args": {"handler": "orders.expire", "delay": 60}}

and the answer is one line, then the server closes the connection::

    {"v": 1, "ok": true, "result": {...}}
    {"v": 1, "ok": false, "error": {"code": "unknown_handler", "message": "..."}}

Guarantees: a request is data only. It names a command the server knows (see
:mod:`wheel_engine.admin.commands`) and arguments of JSON types; nothing in it is evaluated,
imported or unpickled, and a handler it names must be
registered with the engine (else ``unknown_handler``). A request over :data:`MAX_REQUEST_BYTES`
or that is not a JSON object is answered with an error and does no harm to the server. The
version ``v`` is checked both ways: a client and a server of different protocol versions refuse
each other with ``protocol_version`` rather than guess.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any, Final

from wheel_engine.errors import WheelEngineError

__all__ = [
    "MAX_REQUEST_BYTES",
    "PROTOCOL_VERSION",
    "AdminError",
    "AdminUnavailable",
    "ProtocolMismatch",
    "RemoteError",
    "admin_path",
    "decode_line",
    "encode_line",
    "error_response",
    "ok_response",
    "request_line",
]

#: Bumped on any change that an older peer would misread.
PROTOCOL_VERSION: Final = 1
#: One request line at most: room for a 64 KiB payload however JSON escapes it.
MAX_REQUEST_BYTES: Final = 1024 * 1024
#: What a socket path may hold on Linux (``sun_path`` is 108 bytes with its NUL).
MAX_SOCKET_PATH: Final = 107
#: The suffix that names a journal's admin socket.
SOCKET_SUFFIX: Final = "-admin.sock"


class AdminError(WheelEngineError):
    """Anything that went wrong talking over the admin channel."""


class AdminUnavailable(AdminError):
    """No engine answers on that socket: none is there, or it was left by a process now gone."""


class ProtocolMismatch(AdminError):
    """The peer speaks another protocol version, or something that is not this protocol."""


class RemoteError(AdminError):
    """The engine received the request and refused it; ``code`` says why (see server.py)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def admin_path(journal: str | os.PathLike[str]) -> str:
    """The admin socket of a journal: ``<journal>-admin.sock`` beside the real file.

    Symbolic links are resolved, so a client naming the journal through a link (or another
    relative path) finds the socket the engine made. A hard link is another name for the file
    and cannot be told from the name alone: name the journal as the engine does.
    """
    return os.path.realpath(os.fspath(journal)) + SOCKET_SUFFIX


def _json_default(value: Any) -> Any:
    # Payloads scheduled in-process may hold msgpack types JSON lacks: show, never fail.
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, tuple | set | frozenset):
        return list(value)
    return str(value)


def encode_line(message: dict[str, Any]) -> bytes:
    """One message as a JSON line (strict JSON: NaN and infinities are not sent)."""
    text = json.dumps(message, default=_json_default, allow_nan=False, separators=(",", ":"))
    return text.encode("utf-8") + b"\n"


def _no_constants(name: str) -> float:
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e999: valid JSON syntax, but no number JSON can send back
        raise ValueError(f"number out of range: {text[:40]}")
    return value


def decode_line(line: bytes) -> dict[str, Any]:
    """A JSON line back into an object; ``ProtocolMismatch`` if it is not one.

    Refused here, before any command sees them: NaN and the infinities (``NaN``, ``1e999``), and
    nesting deeper than :data:`MAX_NESTING` (the parser's own limit differs between Python
    versions, so the protocol sets its own): each gets an answer, never a crash.
    """
    try:
        message = json.loads(
            line.decode("utf-8"), parse_constant=_no_constants, parse_float=_finite
        )
    except RecursionError:
        raise ProtocolMismatch("not a JSON line (nested too deeply)") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise ProtocolMismatch(f"not a JSON line ({exc})") from None
    if not isinstance(message, dict):
        raise ProtocolMismatch("a message must be a JSON object")
    if _deeper_than(message, MAX_NESTING):
        raise ProtocolMismatch(f"not a JSON line (nested deeper than {MAX_NESTING})")
    return message


#: How deeply a request may nest arrays and objects (the message itself is level 1).
MAX_NESTING: Final = 64


def _deeper_than(message: dict[str, Any], limit: int) -> bool:
    """Whether ``message`` nests containers more than ``limit`` deep (iterative: a deep value
    must not exhaust the stack that checks it)."""
    todo: list[tuple[Any, int]] = [(message, 1)]
    while todo:
        value, depth = todo.pop()
        if depth > limit:
            return True
        inner = value.values() if isinstance(value, dict) else value
        todo.extend((v, depth + 1) for v in inner if isinstance(v, dict | list))
    return False


def request_line(command: str, args: dict[str, Any]) -> bytes:
    return encode_line({"v": PROTOCOL_VERSION, "command": command, "args": args})


def ok_response(result: Any) -> bytes:
    return encode_line({"v": PROTOCOL_VERSION, "ok": True, "result": result})


def error_response(code: str, message: str) -> bytes:
    return encode_line(
        {"v": PROTOCOL_VERSION, "ok": False, "error": {"code": code, "message": message}}
    )
