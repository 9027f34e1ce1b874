"""SIGTERM and SIGINT close the engine gracefully (``Engine.install_signal_handlers``)."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable, Coroutine
from typing import Any

__all__ = ["close_on_signals"]

logger = logging.getLogger(__name__)


def close_on_signals(
    close: Callable[[float], Coroutine[Any, Any, None]],
    grace: float,
    background: set[asyncio.Future[Any]],
) -> None:
    """On SIGTERM or SIGINT, run ``close(grace)`` as a task kept in ``background`` until done."""
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, _close_soon, close, grace, background)


def _close_soon(
    close: Callable[[float], Coroutine[Any, Any, None]],
    grace: float,
    background: set[asyncio.Future[Any]],
) -> None:
    logger.info("signal received: closing with %.1f s grace", grace)
    future = asyncio.ensure_future(close(grace))
    background.add(future)
    future.add_done_callback(background.discard)
