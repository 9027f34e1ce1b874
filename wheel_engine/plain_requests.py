"""The plainest ``schedule_many`` request, recognised without the request checker.

:class:`~wheel_engine.validation.RequestChecker` checks every request fully, in interpreted code
(its checks must raise ``ValueError`` and ``TypeError`` exactly as the contract says, which
compiled annotations would change), at about 8,000 instructions a request: in memory, a third
of what ``schedule_many`` costs per timer. Most requests of a batch have one shape: a ``dict``
of a registered handler's name and one plain number, ``{"handler": h, "at": t}`` or
``{"handler": h, "delay": d}``. :func:`plain_due` recognises exactly that shape, compiled, and
returns the due time the checker would give; anything else, bad input included, is left to the
checker, which then raises or accepts as before.

Guaranteed: for a request :func:`plain_due` accepts, ``RequestChecker.request`` accepts it too,
with the same handler and due time, no payload, no key and ``on_conflict="replace"``
(``tests/engine/test_engine_plain_requests.py`` checks it against the checker). Not
guaranteed: that every request the checker accepts without a payload or key is recognised
(a ``str`` subclass as handler name, a ``datetime``, a mapping that is not a ``dict``: the
checker takes those).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from wheel_engine.validation import MAX_TIME

#: What :func:`plain_due` returns for a request it leaves to the checker (no due time is < 0).
NOT_PLAIN: Final = -1.0


def plain_due(request: Any, handlers: Mapping[str, object], now: float) -> float:
    """The due time of ``request`` if it is a plain request (see the module docstring), else
    :data:`NOT_PLAIN`. Reads ``request``, changes nothing and never raises."""
    if request.__class__ is not dict or len(request) != 2:
        return NOT_PLAIN
    handler = request.get("handler")
    if not (handler.__class__ is str and handler and handler.isascii() and handler in handlers):
        return NOT_PLAIN
    at: Any = request.get("at")
    if at is not None:
        kind = at.__class__
        if (kind is float or kind is int) and 0 <= at <= MAX_TIME:
            return float(at)
        return NOT_PLAIN
    delay: Any = request.get("delay")
    kind = delay.__class__
    if (kind is float or kind is int) and 0 <= delay <= MAX_TIME:
        due = now + float(delay)
        if due <= MAX_TIME:
            return due
    return NOT_PLAIN
