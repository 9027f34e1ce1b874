"""What the engine keeps and logs about failures: a bounded error text (``last_error``).

The text goes into a journal record on every failed attempt and into the WARNING line of a timer
that goes DEAD, so it must be small and must not carry what the application would not write to
disk: a handler's ``describe_error`` hook decides what is kept, and either way the text is cut
to ``max_error_bytes`` of UTF-8.

Guaranteed: the result encodes as UTF-8 (lone surrogates become ``?``) in at most ``limit``
bytes, except that an exception's type name is never cut (class names are code, not data); a
cut ends on a character boundary and is followed by a marker naming how many bytes were cut.
Not guaranteed: that a message without a hook holds no secret; only the hook can know that.

Log lines name timers by key, version and attempt, with the bounded text; never a payload.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

__all__ = [
    "DEFAULT_MAX_ERROR_BYTES",
    "MIN_ERROR_BYTES",
    "ErrorDescriber",
    "bounded",
    "default",
    "describe",
    "one_line",
]

logger = logging.getLogger(__name__)

DEFAULT_MAX_ERROR_BYTES = 2048  # room for a useful message; a 10 MB response body is not one
MIN_ERROR_BYTES = 64  # below this not even a type name and the cut marker fit

#: A handler's ``describe_error`` hook: the text to keep about one exception.
ErrorDescriber = Callable[[BaseException], str]


def _marker(cut: int) -> bytes:
    return f" [... {cut} bytes cut]".encode()


def bounded(text: str, limit: int, keep: int = 0) -> str:
    """``text`` in at most ``limit`` UTF-8 bytes, its first ``keep`` bytes never cut."""
    data = text.encode("utf-8", "replace")
    if len(data) <= limit:
        return text if text.isascii() else data.decode()  # lone surrogates replaced
    # The marker for the whole length is at least as long as the marker for what is cut.
    room = max(limit - len(_marker(len(data))), keep)
    while room > keep and (data[room] & 0xC0) == 0x80:  # a UTF-8 continuation byte
        room -= 1
    return data[:room].decode() + _marker(len(data) - room).decode()


def default(error: BaseException, limit: int) -> str:
    """``"<type>: <message>"``, bounded; the type alone if ``str(error)`` itself fails."""
    name = type(error).__name__
    try:
        message = str(error)
    except Exception:  # a broken __str__ must not break the engine's bookkeeping
        return name
    prefix = f"{name}: "
    return bounded(prefix + message, limit, keep=len(prefix.encode("utf-8", "replace")))


def describe(
    error: BaseException,
    hook: ErrorDescriber | None,
    limit: int,
    *,
    handler: str,
    failed_hooks: set[str],
) -> str:
    """The bounded text kept about ``error``: ``hook(error)``'s, or :func:`default`'s.

    A hook that raises (or returns something else than a ``str``) leaves the type name alone;
    that is logged once per handler (``failed_hooks`` remembers which), with the type of what
    the hook raised only: its message may hold what the hook was meant to keep out.
    """
    if hook is None:
        return default(error, limit)
    try:
        text = hook(error)
        if not isinstance(text, str):
            raise TypeError(f"describe_error returned {type(text).__name__}, not str")
    except Exception as exc:
        if handler not in failed_hooks:
            failed_hooks.add(handler)
            logger.warning(
                "describe_error of handler %r raised %s; keeping only exception types "
                "(logged once per handler)",
                handler,
                type(exc).__name__,
            )
        return type(error).__name__
    return bounded(text, limit)


def one_line(text: str) -> str:
    """A stored error text as one log line: line breaks shown as escapes, not obeyed."""
    return text.replace("\r", "\\r").replace("\n", "\\n")
