"""``Engine()``'s options for several nodes, checked before anything is opened or written.

Stdlib only: an engine on a SQLite file imports this to reject the options, never psycopg.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from journal.urls import is_postgres_url

if TYPE_CHECKING:
    from wheel_engine.nodes.node import Node

__all__ = ["check_node_options", "is_postgres_url", "node_for"]


def _seconds(name: str, value: object) -> None:
    if value.__class__ is bool or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number of seconds, not {value!r}")
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"{name} must be a positive, finite number of seconds, not {value!r}")


def check_node_options(
    path: object,
    node: object,
    lease: object,
    horizon: object,
    admin: bool,
    *,
    connect_timeout: object = None,
) -> None:
    """``ValueError``/``TypeError`` for a bad ``node``, ``lease``, ``horizon`` or
    ``connect_timeout``, for any of them without a PostgreSQL URL, and for ``admin=True`` with
    one."""
    if not is_postgres_url(path):
        named = (("node", node), ("lease", lease), ("horizon", horizon))
        given = [n for n, v in (*named, ("connect_timeout", connect_timeout)) if v is not None]
        if given:
            verb = "needs" if len(given) == 1 else "need"
            raise ValueError(f"{', '.join(given)} {verb} a postgresql:// URL as the journal")
        return
    if admin:
        raise ValueError(
            "admin=True serves a Unix socket beside a SQLite journal; with PostgreSQL the CLI"
            " takes the URL itself (wheel-engine status|cancel|redrive postgresql://...)"
        )
    if node is not None and (not isinstance(node, str) or not node or not node.isprintable()):
        raise ValueError(f"node must be a non-empty printable str, not {node!r}")
    if lease is not None:
        _seconds("lease", lease)
    if horizon is not None:
        _seconds("horizon", horizon)
    if connect_timeout is not None:
        _seconds("connect_timeout", connect_timeout)


def node_for(
    path: object,
    node: str | None,
    lease: float | None,
    horizon: float | None,
    retained: tuple[float, int],
    connect_timeout: float | None = None,
) -> Node | None:
    """The engine's :class:`~wheel_engine.nodes.node.Node` for a PostgreSQL URL, else None
    (psycopg is imported only then). ``retained``: the engine's ``(retention, max_retained)``."""
    if not isinstance(path, str) or not is_postgres_url(path):
        return None
    from wheel_engine.nodes.node import Node

    retention, max_retained = retained
    return Node(
        path,
        name=node,
        lease=lease,
        horizon=horizon,
        retention=retention,
        max_retained=max_retained,
        connect_timeout=connect_timeout,
    )
