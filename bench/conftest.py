"""Fixtures the micro benchmarks share (``python -m pytest bench --benchmark-only``)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """A fresh event loop of the benchmark's own, closed after the test: the benchmarks drive it
    with ``run_until_complete`` inside timed rounds, which pytest-asyncio's loop would not allow."""
    lp = asyncio.new_event_loop()
    yield lp
    lp.close()
