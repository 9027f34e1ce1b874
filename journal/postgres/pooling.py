"""The connection pool of a :class:`~journal.postgres.PostgresStore`, and checking out one of
its connections with the driver's errors translated."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any, Final

import psycopg
from psycopg_pool import AsyncConnectionPool

from journal.postgres.errors import translated
from journal.postgres.target import Target

__all__ = ["CONNECTION_KWARGS", "checkout", "new_pool"]

#: Options for every connection: autocommit (each statement its own transaction unless a
#: ``transaction()`` block says otherwise) and no server-side prepared statements.
CONNECTION_KWARGS: Final[dict[str, Any]] = {"autocommit": True, "prepare_threshold": None}


def new_pool(target: Target, node: str, size: int, timeout: float) -> AsyncConnectionPool:
    """A pool of up to ``size`` connections to ``target``, not open yet."""
    return AsyncConnectionPool(
        target.url,
        min_size=1,
        max_size=size,
        kwargs={**CONNECTION_KWARGS, **target.kwargs()},
        timeout=timeout,
        open=False,
        name=f"wheel-engine {node}",
    )


@contextlib.asynccontextmanager
async def checkout(
    pool: AsyncConnectionPool, target: Target, doing: str
) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    """A pooled connection, with driver errors (a pool timeout too) translated."""
    with translated(target.where, doing, target.scrub):
        async with pool.connection() as conn:
            yield conn
