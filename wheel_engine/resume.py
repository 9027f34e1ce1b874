"""A coroutine's first step taken, and the rest of it driven from another task.

:mod:`wheel_engine.eager` steps an async handler's coroutine once where the handler starts and
hands what is left to a task only if it waits. Two small pieces, interpreted on purpose (not in
the compiled core): a ``types.coroutine`` generator must be a real generator, and the first
step's ``StopIteration`` is caught where catching it costs least (compiled code adds a
traceback entry to every exception it sees; measured in ``docs/design.md``).
"""

from __future__ import annotations

import asyncio
import contextvars
import types
from collections.abc import Coroutine, Generator
from typing import Any, Final

#: What :func:`first_step` answers for a coroutine that returned (its value is not kept: a
#: handler's return value means nothing to the engine).
RETURNED: Final = object()


def first_step(context: contextvars.Context, coro: Coroutine[Any, Any, Any]) -> Any:
    """Step ``coro`` once in ``context``: what it yielded (it waits), or :data:`RETURNED`.
    What it raised propagates."""
    try:
        return context.run(coro.send, None)
    except StopIteration:
        return RETURNED


@types.coroutine
def resume(coro: Coroutine[Any, Any, Any], yielded: Any, throw: bool) -> Generator[Any, Any, Any]:
    """Drive the rest of ``coro``, whose first step yielded ``yielded``, from the awaiting task:
    each value it yields goes to the task, each ``send``/``throw`` back to it (``yield from``
    on a coroutine already started). ``throw``: cancel first, as ``Task.cancel`` would have
    (the future it waits on, then ``CancelledError`` into it)."""
    if throw:
        if isinstance(yielded, asyncio.Future):
            yielded.cancel()
        try:
            yielded = coro.throw(asyncio.CancelledError())
        except StopIteration as stop:
            return stop.value
    while True:
        try:
            sent = yield yielded
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:
            try:
                yielded = coro.throw(exc)
            except StopIteration as stop:
                return stop.value
        else:
            try:
                yielded = coro.send(sent)
            except StopIteration as stop:
                return stop.value
