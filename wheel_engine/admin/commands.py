"""What each admin command does, through the engine's public API only.

Every command takes the request's ``args`` (a JSON object), checks that it names only the
arguments the command knows, and calls one public method of :class:`~wheel_engine.Engine`
(``schedule``, ``cancel``, ``redrive``, ``compact``, ``get``, ``lookup``, ``timers``,
``stats``). The engine validates the values itself, exactly as for a call in the service's own
code: a handler that is not registered is ``UnknownHandler``, a bad time or payload a
``ValueError``/``TypeError``, and nothing is written then. No command evaluates, imports or
runs anything named in a request.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final

from wheel_engine.admin.protocol import PROTOCOL_VERSION, RemoteError
from wheel_engine.model import TimerInfo, TimerState

if TYPE_CHECKING:
    from wheel_engine.admin.api import EngineAPI

__all__ = ["COMMAND_TABLE", "plain", "timer_wire"]

Command = Callable[["EngineAPI", dict[str, Any]], Awaitable[dict[str, Any]]]

#: Arguments each command accepts (any other name is refused as ``invalid``).
_SCHEDULE_ARGS: Final = frozenset({"handler", "at", "delay", "key", "payload", "on_conflict"})
_CANCEL_ARGS: Final = frozenset({"key", "version"})
_REDRIVE_ARGS: Final = frozenset({"key", "all_dead", "handler", "at"})


def timer_wire(info: TimerInfo | None) -> dict[str, Any] | None:
    """A timer as JSON-ready data (the payload as the engine holds it)."""
    if info is None:
        return None
    return {
        "key": info.key,
        "version": info.version,
        "handler": info.handler,
        "due": info.due,
        "state": info.state.value,
        "attempts": info.attempts,
        "last_error": info.last_error,
        "payload": info.payload,
    }


def _known(args: dict[str, Any], allowed: frozenset[str]) -> None:
    unknown = sorted(set(args) - allowed)
    if unknown:
        raise RemoteError("invalid", f"unknown argument(s): {', '.join(unknown)}")


def _text(args: dict[str, Any], name: str, *, required: bool) -> str | None:
    value = args.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value:
        raise RemoteError("invalid", f"{name} must be a non-empty string")
    return value


def _int_or_none(args: dict[str, Any], name: str) -> int | None:
    value = args.get(name)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise RemoteError("invalid", f"{name} must be an integer")
    return value


def plain(value: Any) -> Any:
    """Stats (or any answer) as strict JSON: non-finite floats (no JSON number) become None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


async def ping(engine: EngineAPI, args: dict[str, Any]) -> dict[str, Any]:
    from wheel_engine import __version__

    _known(args, frozenset())
    return {
        "protocol": PROTOCOL_VERSION,
        "wheel_engine": __version__,
        "pid": os.getpid(),
        "journal": engine.path,
    }


async def status(engine: EngineAPI, args: dict[str, Any]) -> dict[str, Any]:
    _known(args, frozenset())
    return {**(await ping(engine, args)), "stats": plain(engine.stats())}


async def schedule(engine: EngineAPI, args: dict[str, Any]) -> dict[str, Any]:
    _known(args, _SCHEDULE_ARGS)
    handler = _text(args, "handler", required=True)
    assert handler is not None
    key = _text(args, "key", required=False)
    on_conflict = args.get("on_conflict", "replace")
    # A kept timer is the live one read just before (versions only grow, so a schedule that
    # wrote anything answers with a newer version). In memory and on SQLite the read does not
    # suspend, so nothing runs between it and the schedule; on PostgreSQL another node's
    # schedule may land between them, and a keep of that timer then reads as scheduled.
    seen = await engine.lookup(key) if key is not None and on_conflict == "keep" else None
    info = await engine.schedule(
        handler,
        at=args.get("at"),
        delay=args.get("delay"),
        payload=args.get("payload"),
        key=key,
        on_conflict=on_conflict,
    )
    kept = seen is not None and seen.state.is_live and info.version == seen.version
    return {"timer": timer_wire(info), "kept": kept}


async def cancel(engine: EngineAPI, args: dict[str, Any]) -> dict[str, Any]:
    _known(args, _CANCEL_ARGS)
    key = _text(args, "key", required=True)
    assert key is not None
    result = await engine.cancel(key, version=_int_or_none(args, "version"))
    return {"result": result.value, "timer": timer_wire(engine.get(key))}


async def redrive(engine: EngineAPI, args: dict[str, Any]) -> dict[str, Any]:
    _known(args, _REDRIVE_ARGS)
    key = _text(args, "key", required=False)
    all_dead = args.get("all_dead", False)
    if not isinstance(all_dead, bool) or (key is None) == (not all_dead):
        raise RemoteError("invalid", "give either key or all_dead=true")
    handler = _text(args, "handler", required=False)
    if key is not None:
        info = engine.get(key)
        if info is None:
            raise RemoteError("not_found", f"no timer with key {key!r}")
        if info.state is not TimerState.DEAD:
            raise RemoteError(
                "not_dead", f"timer {key!r} is {info.state.value}; only DEAD timers are redriven"
            )
        keys = [key]
    else:
        keys = [t.key for t in engine.timers(state=TimerState.DEAD, handler=handler)]
    done = []
    for k in keys:
        current = engine.get(k)
        if current is not None and current.state is TimerState.DEAD:  # not redriven meanwhile
            done.append(timer_wire(await engine.redrive(k, at=args.get("at"))))
    return {"redriven": len(done), "timers": done}


async def compact(engine: EngineAPI, args: dict[str, Any]) -> dict[str, Any]:
    _known(args, frozenset())
    before = engine.stats()["journal_records"]
    started = time.perf_counter()
    await engine.compact()
    return {
        "records_before": before,
        "records_after": engine.stats()["journal_records"],
        "seconds": round(time.perf_counter() - started, 3),
    }


_RECURRING_RULE = frozenset({"cron", "every", "tz", "payload", "catch_up", "overlap", "start"})


async def schedule_recurring(engine: EngineAPI, args: dict[str, Any]) -> dict[str, Any]:
    """Schedule (or replace) a recurrence: ``name``, ``handler`` and the rule's keywords."""
    _known(args, _RECURRING_RULE | {"name", "handler"})
    name = _text(args, "name", required=True)
    handler = _text(args, "handler", required=True)
    assert name is not None and handler is not None
    rule = {field: args[field] for field in _RECURRING_RULE if field in args}
    info = await engine.schedule_recurring(name, handler, **rule)
    return {"recurrence": plain(info._asdict())}


async def cancel_recurring(engine: EngineAPI, args: dict[str, Any]) -> dict[str, Any]:
    """Cancel a recurrence (only at ``version``, when given): ``{"canceled": bool}``."""
    _known(args, frozenset({"name", "version"}))
    name = _text(args, "name", required=True)
    assert name is not None
    version = _int_or_none(args, "version")
    return {"canceled": await engine.cancel_recurring(name, version=version)}


#: Every command the server answers, by name.
COMMAND_TABLE: Final[dict[str, Command]] = {
    "ping": ping,
    "status": status,
    "schedule": schedule,
    "cancel": cancel,
    "redrive": redrive,
    "compact": compact,
    "schedule_recurring": schedule_recurring,
    "cancel_recurring": cancel_recurring,
}
