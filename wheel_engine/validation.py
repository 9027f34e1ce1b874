"""Input checks for the public calls: everything is rejected before anything is written.

Each check here is pure: it reads its arguments and raises or returns a clean value, so the
engine can run every check of a call (or of a whole ``schedule_many`` batch) before it changes
anything in memory or the journal. What is guaranteed of a value that passed:

- a name (key, handler) is a plain, non-empty ``str`` that encodes as UTF-8: the journal can
  always write it. A ``str`` subclass (``StrEnum`` members, say) is accepted and turned into a
  plain ``str`` first, so no method of the subclass runs afterwards;
- a time is finite epoch seconds in ``[0, MAX_TIME]``: the wheel can always place it;
- a payload is msgpack that decodes back to a value that encodes to the very same bytes. That
  decoded value is what handlers get, before and after a restart alike (arrays come back as
  lists, as msgpack has it).

The module is compiled with mypyc (``_build.py``), and still raises exactly what it raises
interpreted: compiled code checks each argument against its annotation on entry (a
``TypeError`` of mypyc's own wording), so every parameter that can hold a user's value is
``object`` or ``Any`` and is narrowed inside, by the checks that give the documented errors.
``tests/test_build.py`` holds the compiled build to that contract.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any, Final, NamedTuple

from wheel_engine.diagnostics import MIN_ERROR_BYTES
from wheel_engine.errors import DuplicateKey, UnknownHandler
from wheel_engine.key_index import KeyIndex
from wheel_engine.payload import encode_payload

# Final: compiled code reads these as constants, not by a lookup in the module's dict.
#: What ``on_conflict`` may say (``schedule()`` documents each).
ON_CONFLICT: Final = ("replace", "keep", "error")
#: The keywords a request of ``schedule_many`` may hold: ``schedule()``'s.
REQUEST_KEYS: Final = frozenset({"handler", "at", "delay", "payload", "key", "on_conflict"})
#: The latest due time accepted: 9999-12-31T23:59:59Z, the last second a ``datetime`` can show.
MAX_TIME: Final = 253_402_300_799.0
#: MAX_TIME as an int, to compare an int due time with (exactly the same bound).
LAST_SECOND: Final = 253_402_300_799

#: Builds a ``CheckedRequest`` without the named tuple's Python-level ``__new__``.
_new_tuple: Final = tuple.__new__


class CheckedRequest(NamedTuple):
    """One ``schedule()`` request that passed every check of :class:`RequestChecker`: clean
    values, nothing changed yet."""

    handler: str  #: a registered handler's name, as a plain ``str``
    due: float  #: epoch seconds in ``[0, MAX_TIME]``
    payload: Any  #: as it decodes from ``data`` (what a restart would give)
    data: bytes | None  #: the payload's msgpack bytes (None for no payload)
    key: str | None  #: None: the engine makes one
    on_conflict: str  #: one of :data:`ON_CONFLICT`


def check_engine_options(
    tick: Any,
    durability: Any,
    max_concurrency: Any,
    retention: Any,
    max_retained: Any,
    max_error_bytes: Any,
    admin: Any = False,
    path: object = None,
) -> None:
    """``Engine()``'s own arguments: ``ValueError`` for any out of range (or ``admin=True``
    without a journal ``path``). Every argument is ``Any``: each is compared as Python
    compares it (a ``tick="x"`` fails in ``>``, as it would interpreted)."""
    if not (tick > 0 and math.isfinite(tick)):
        raise ValueError("tick must be a positive number of seconds")
    if durability not in ("full", "normal"):
        raise ValueError('durability must be "full" or "normal"')
    if max_concurrency < 1:
        raise ValueError("max_concurrency must be at least 1")
    if not (isinstance(max_error_bytes, int) and max_error_bytes >= MIN_ERROR_BYTES):
        raise ValueError(f"max_error_bytes must be an int >= {MIN_ERROR_BYTES}")
    if not math.isfinite(MAX_TIME / tick):
        raise ValueError("tick is too small to place every due time")
    if not retention >= 0:  # NaN too; math.inf keeps finished timers up to max_retained
        raise ValueError("retention must be a number of seconds >= 0")
    if max_retained.__class__ is bool or not isinstance(max_retained, int) or max_retained < 0:
        raise ValueError("max_retained must be an int >= 0")
    if admin and path is None:
        raise ValueError("admin=True needs a journal path: the socket is named after it")


class RequestChecker:
    """Checks schedule requests against the registered ``handlers`` and the live ``timers``
    (for ``on_conflict="error"``), both the engine's own mappings, read, never changed."""

    __slots__ = ("_handlers", "_max_payload_bytes", "_timers")

    def __init__(
        self, handlers: Mapping[str, object], timers: KeyIndex, max_payload_bytes: Any
    ) -> None:
        self._handlers = handlers
        self._timers = timers
        self._max_payload_bytes = max_payload_bytes

    def leave_conflicts_to_the_store(self) -> None:
        """The store, shared by several nodes (PostgreSQL), decides ``on_conflict="error"``,
        not this node's memory: no request is checked against the live timers any more."""
        self._timers = KeyIndex()  # empty: it finds no key

    def request(
        self,
        handler: Any,
        at: Any,
        delay: Any,
        payload: Any,
        key: Any,
        on_conflict: Any,
        now: Any,
    ) -> CheckedRequest:
        """Check one request completely; nothing is changed. Raises on anything wrong:
        ``UnknownHandler``, ``DuplicateKey``, ``ValueError``, ``TypeError`` (see ``schedule()``).

        Every argument is ``Any``, so the compiled build checks no type on the way in: each
        value meets the same checks (and Python's own operators) as it does interpreted, and
        raises the same exception with the same message. ``now`` (the clock's epoch seconds)
        too, here and in :meth:`each` and :func:`due_time`: a clock's int stays an int in
        ``now + delay``, as it would interpreted, and a batch's float is not re-boxed per
        request.
        """
        handler = check_name(handler, "handler")
        if handler not in self._handlers:
            raise UnknownHandler(f"no handler registered as {handler!r}")
        if on_conflict not in ON_CONFLICT:
            raise ValueError(f"on_conflict must be one of {ON_CONFLICT}, not {on_conflict!r}")
        # schedule()'s hot path: a plain number in range for exactly one of delay and at needs
        # none of due_time's calls (which give the same value, or raise with the reason).
        # type() reads the type in C (``.__class__`` is an attribute lookup); an exact float
        # is narrowed, so compiled code compares it as a C double (NaN fails both bounds).
        if at is None:
            kind = type(delay)
            if (kind is float or kind is int) and 0 <= delay <= MAX_TIME:
                due = now + delay
                if due > MAX_TIME:
                    due = due_time(now, at, delay)  # raises, with the reason
            else:
                due = due_time(now, at, delay)
        elif delay is None and type(at) is float:
            due = at if 0.0 <= at <= MAX_TIME else due_time(now, at, delay)
        elif delay is None and type(at) is int:
            # Compared with an int bound: compiled, int <= float converts the int to a C double
            # first, which overflows for a huge int (due_time's ValueError says out of range).
            due = float(at) if 0 <= at <= LAST_SECOND else due_time(now, at, delay)
        else:
            due = due_time(now, at, delay)
        if key is not None:
            key = check_key(key)
            if on_conflict == "error":
                live = self._timers.get(key)
                if live is not None and live.state.is_live:
                    raise DuplicateKey(f"key {key!r} names a live timer (version {live.version})")
        data = None
        if payload is not None:
            data, payload = encode_payload(payload, self._max_payload_bytes)
        # tuple.__new__ skips NamedTuple's Python-level __new__ (one call less per schedule).
        return _new_tuple(CheckedRequest, (handler, due, payload, data, key, on_conflict))

    def batch(self, requests: Iterable[Any], now: Any) -> list[CheckedRequest]:
        """:meth:`each` request of a ``schedule_many`` batch checked, plus what only a batch can
        get wrong: a key given twice when one of them says ``on_conflict="error"``."""
        checked: list[CheckedRequest] = []
        claimed: set[str] = set()  # keys this batch schedules, for on_conflict="error"
        for valid in self.each(requests, now):
            key = valid.key
            if key is not None:
                if key in claimed and valid.on_conflict == "error":
                    raise DuplicateKey(f"key {key!r} appears twice in this batch")
                claimed.add(key)
            checked.append(valid)
        return checked

    def each(self, requests: Iterable[Any], now: Any) -> Iterator[CheckedRequest]:
        """:meth:`request` for each request of a ``schedule_many`` batch (a mapping of
        ``schedule()``'s keywords), in order, as it is iterated; ``TypeError`` also for a
        request that is not a mapping or has an unknown keyword. A generator: one frame for
        the batch, not a call per request."""
        check = self.request
        for request in requests:
            if request.__class__ is not dict and not isinstance(request, Mapping):
                raise TypeError(f"schedule_many takes mappings, not {type(request).__name__}")
            if not request.keys() <= REQUEST_KEYS:
                unknown = ", ".join(sorted(map(repr, set(request) - REQUEST_KEYS)))
                raise TypeError(f"unknown schedule option(s): {unknown}")
            get = request.get
            yield check(
                get("handler"),
                get("at"),
                get("delay"),
                get("payload"),
                get("key"),
                get("on_conflict", "replace"),
                now,
            )


def check_version(version: object) -> None:
    """A version given to ``cancel()``: None or an int (not a bool), else ``TypeError``."""
    if version is not None and (version.__class__ is bool or not isinstance(version, int)):
        raise TypeError(f"version must be an int, not {type(version).__name__}")


def due_time(now: Any, at: object, delay: object) -> float:
    """Epoch seconds from exactly one of ``at`` and ``delay``.

    ``ValueError`` for both or neither, a naive datetime, and a time that is negative, NaN,
    infinite or past :data:`MAX_TIME` (never ``OverflowError``); ``TypeError`` for a non-number.
    """
    if (at is None) == (delay is None):
        raise ValueError("give exactly one of at= and delay=")
    if delay is not None:
        return _in_range("delay", now + _seconds("delay", delay), delay)
    if isinstance(at, datetime):
        if at.tzinfo is None or at.tzinfo.utcoffset(at) is None:
            raise ValueError("at= must be an aware datetime (it has no time zone)")
        try:
            stamp = at.timestamp()
        except (OverflowError, ValueError) as exc:
            raise ValueError(f"at= is out of range: {at!r}") from exc
        return _in_range("at", stamp, at)
    return _in_range("at", _seconds("at", at), at)


def _seconds(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name}= must be a number of seconds, not {type(value).__name__}")
    try:
        seconds = float(value)
    except OverflowError:  # an int too large for a float
        raise ValueError(f"{name}= is out of range: {value!r}") from None
    if not math.isfinite(seconds):
        raise ValueError(f"{name}= must be finite, not {value!r}")
    if seconds < 0:
        raise ValueError(f"{name}= must be >= 0, not {value!r}")
    return seconds


def _in_range(name: str, due: float, given: object) -> float:
    if not 0.0 <= due <= MAX_TIME:  # also False for NaN
        raise ValueError(f"{name}={given!r} gives a due time out of range (0 to {MAX_TIME:.0f})")
    return due


def check_name(value: object, what: str) -> str:
    """``value`` as a plain ``str`` that the journal can store, or ``TypeError``/``ValueError``.

    A ``str`` subclass is copied into a plain ``str`` (``str.__str__`` runs no method of the
    subclass); anything else that is not a ``str`` is a ``TypeError``.
    """
    if type(value) is not str:
        if not isinstance(value, str):
            raise TypeError(f"{what} must be a str, not {type(value).__name__}")
        value = str.__str__(value)
    if not value:
        raise ValueError(f"{what} must not be empty")
    if not value.isascii():  # isascii is O(1): only non-ASCII names pay for the encode
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValueError(f"{what} {value!r} cannot be encoded as UTF-8: {exc.reason}") from None
    return value


def check_key(key: object) -> str:
    """:func:`check_name` for a timer's key."""
    return check_name(key, "key")
