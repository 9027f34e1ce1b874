"""A bare ``schedule_many`` request (a handler and a time, nothing else), recognised without
the request checker.

:class:`~wheel_engine.validation.RequestChecker` checks every request fully, raising
``ValueError`` and ``TypeError`` exactly as the contract says, a large share of what
``schedule_many`` costs per timer in memory (``docs/design.md``, "Measured in the core").
Most requests of a batch have one shape: a ``dict`` of a registered handler's name and one
number (an exact ``int`` or ``float``), ``{"handler": h, "at": t}`` or
``{"handler": h, "delay": d}``. :func:`bare_due` recognises exactly that shape, compiled, and
returns the due time the checker would give; anything else, bad input included, is left to the
checker, which then raises or accepts as before.

Guaranteed: for a request :func:`bare_due` accepts, ``RequestChecker.request`` accepts it too,
with the same handler and due time, no payload, no key and ``on_conflict="replace"``
(``tests/engine/test_engine_bare_requests.py`` checks it against the checker). Not
guaranteed: that every request the checker accepts without a payload or key is recognised
(a ``str`` subclass as handler name, a ``datetime``, a mapping that is not a ``dict``: the
checker takes those). :func:`bare_head` builds the timers and rows of a batch's head of
bare requests in one compiled loop.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, cast

from journal.codec import schedule_row
from wheel_engine.engine_keys import EngineKeys
from wheel_engine.timer import Timer
from wheel_engine.validation import LAST_SECOND, MAX_TIME

#: What :func:`bare_due` returns for a request it leaves to the checker (no due time is < 0).
NOT_BARE: Final = -1.0


def bare_due(request: object, handlers: dict[str, Any], now: float) -> float:
    """The due time of ``request`` if it is a bare request (see the module docstring), else
    :data:`NOT_BARE`. Reads ``request``, changes nothing and never raises."""
    if type(request) is not dict:
        return NOT_BARE
    fields = cast("dict[str, object]", request)
    if len(fields) != 2:
        return NOT_BARE
    name = fields.get("handler")
    if type(name) is not str:
        return NOT_BARE
    if not name or not name.isascii() or name not in handlers:  # else the checker's UTF-8 test
        return NOT_BARE
    at = fields.get("at")
    if at is not None:
        return seconds(at)
    delay = seconds(fields.get("delay"))
    if delay < 0.0:
        return NOT_BARE
    due = now + delay
    return due if due <= MAX_TIME else NOT_BARE


def seconds(value: object) -> float:
    """``value`` as float seconds if it is a ``float`` or an ``int`` (not a subclass, not a
    bool) in ``[0, MAX_TIME]``, else :data:`NOT_BARE` (NaN too)."""
    kind = type(value)
    if kind is float:
        number = cast(float, value)
        return number if 0.0 <= number <= MAX_TIME else NOT_BARE
    if kind is int:
        whole = cast(int, value)
        return float(whole) if 0 <= whole <= LAST_SECOND else NOT_BARE
    return NOT_BARE


def bare_head(
    requests: Sequence[Mapping[str, Any]],
    handlers: dict[str, Any],
    now: float,
    key_of: tuple[EngineKeys, int, int],
    durable: bool,
) -> tuple[list[Timer], list[tuple[int, bytes]]]:
    """The timers of ``requests``' head of bare requests, up to the first that is not, and
    (``durable``) their journal rows; built, put nowhere. ``key_of`` is (the engine's keys,
    first serial, first version): the i-th timer's key is ``keys.key(serial + i)``, its version
    ``version + i``, as ``Scheduler.schedule_many`` numbers them. Nothing is taken from
    ``keys``: the caller skips past the serials it keeps."""
    keys, serial, version = key_of
    prefix = keys.prefix  # each timer keeps its serial, its key spelled only when asked
    made: list[Timer] = []
    rows: list[tuple[int, bytes]] = []
    for request in requests:
        due = bare_due(request, handlers, now)
        if due < 0.0:
            break
        handler: str = request["handler"]
        made.append(Timer(prefix, version, handler, due, None, serial=serial))
        if durable:
            rows.append(schedule_row(keys.key(serial), version, handler, due, None, now))
        serial += 1
        version += 1
    return made, rows
