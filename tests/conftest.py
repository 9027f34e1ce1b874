"""Runs ``async def`` tests on a fresh event loop each, without a plugin; hypothesis profiles."""

from __future__ import annotations

import asyncio
import inspect
import os
from typing import Any

import pytest
from hypothesis import settings

# tests/pg_cluster.py's fixtures (pg_server, pg_url): one cluster for the whole session.
pytest_plugins = ["pg_cluster"]

# CI (CI=true) runs every property test on a fixed sequence of examples, so a landing is never
# decided by the draw; developers' runs keep exploring new examples (how the crash model found
# the bugs fixed in 71fecd7 and 316f1e8). Shared machines are slow: no per-example deadline.
settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("dev", deadline=None, print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    names = pyfuncitem._fixtureinfo.argnames
    kwargs: dict[str, Any] = {name: pyfuncitem.funcargs[name] for name in names}
    asyncio.run(pyfuncitem.obj(**kwargs))
    return True
