"""The system under test: wheel-engine, through its public API only (SPEC.md).

``engine_missing(durable)`` runs a tiny probe (start, schedule one timer, see it fire, close) and
returns why the engine cannot be benchmarked here, or None. The answer is cached per process,
so a missing or broken engine costs one probe and every engine row says why it was skipped.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.compare.measure import short_error

_status: dict[bool, str | None] = {}

HANDLER = "bench"


def new_engine(path: Path | None, **kwargs: Any) -> Any:
    from wheel_engine import Engine

    kwargs.setdefault("tick", 0.001)
    return Engine(str(path) if path is not None else None, **kwargs)


def register(engine: Any, fn: Callable[..., Any], name: str = HANDLER) -> None:
    reg = getattr(engine, "register", None)
    if reg is not None:
        reg(name, fn)
    else:
        engine.handler(name)(fn)


async def _probe(path: Path | None) -> None:
    fired = asyncio.get_running_loop().create_future()

    def h(firing: Any) -> None:
        if not fired.done():
            fired.set_result(time.time() - firing.due)

    engine = new_engine(path)
    register(engine, h)
    async with engine:
        await engine.schedule(HANDLER, delay=0.01)
        await asyncio.wait_for(fired, 5.0)


def engine_missing(durable: bool = False) -> str | None:
    """Why wheel-engine cannot be benchmarked here (None: it can)."""
    if durable in _status:
        return _status[durable]
    why: str | None = None
    try:
        import wheel_engine

        if not hasattr(wheel_engine.Engine, "schedule"):
            why = "wheel_engine.Engine is still a placeholder (no schedule())"
    except Exception as exc:
        why = f"cannot import wheel_engine: {short_error(exc)}"
    if why is None:
        tmp = None
        try:
            if durable:
                tmp = tempfile.mkdtemp(prefix="wheel-engine-probe-")
                asyncio.run(_probe(Path(tmp) / "probe.db"))
            else:
                asyncio.run(_probe(None))
        except Exception as exc:
            kind = "durable" if durable else "in-memory"
            why = f"{kind} engine probe failed: {short_error(exc)}"
        finally:
            if tmp:
                for f in Path(tmp).iterdir():
                    os.remove(f)
                os.rmdir(tmp)
    _status[durable] = why
    return why
