"""The admin channel: a running engine serves the CLI's writing commands over a Unix socket.

``Engine(..., admin=True)`` starts an :class:`AdminServer` on ``<journal>-admin.sock`` (mode
0600) and closes it with the engine; :func:`request` is the synchronous client the CLI uses.
The wire format and its guarantees are in :mod:`wheel_engine.admin.protocol`.
"""

from wheel_engine.admin.client import request
from wheel_engine.admin.protocol import (
    PROTOCOL_VERSION,
    AdminError,
    AdminUnavailable,
    ProtocolMismatch,
    RemoteError,
    admin_path,
)
from wheel_engine.admin.server import AdminServer

__all__ = [
    "PROTOCOL_VERSION",
    "AdminError",
    "AdminServer",
    "AdminUnavailable",
    "ProtocolMismatch",
    "RemoteError",
    "admin_path",
    "request",
]
