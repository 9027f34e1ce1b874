"""Input checks for schedule(): everything is rejected before anything is written."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

import msgpack

ON_CONFLICT = ("replace", "keep", "error")


def due_time(now: float, at: datetime | float | int | None, delay: float | int | None) -> float:
    """Epoch seconds from exactly one of ``at`` and ``delay``."""
    if (at is None) == (delay is None):
        raise ValueError("give exactly one of at= and delay=")
    if delay is not None:
        return now + _seconds("delay", delay)
    if isinstance(at, datetime):
        if at.tzinfo is None or at.tzinfo.utcoffset(at) is None:
            raise ValueError("at= must be an aware datetime (it has no time zone)")
        return at.timestamp()
    return _seconds("at", at)


def _seconds(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name}= must be a number of seconds, not {type(value).__name__}")
    seconds = float(value)
    if not math.isfinite(seconds):
        raise ValueError(f"{name}= must be finite, not {value!r}")
    if seconds < 0:
        raise ValueError(f"{name}= must be >= 0, not {value!r}")
    return seconds


def check_key(key: object) -> str:
    if not isinstance(key, str):
        raise TypeError(f"key must be a string, not {type(key).__name__}")
    if not key:
        raise ValueError("key must not be empty")
    return key


def encode_payload(payload: Any, limit: int) -> bytes | None:
    """msgpack bytes of ``payload`` (None stays None). TypeError if msgpack cannot encode it."""
    if payload is None:
        return None
    try:
        data: bytes = msgpack.packb(payload, use_bin_type=True)
    except (TypeError, ValueError, OverflowError) as exc:
        raise TypeError(f"payload cannot be encoded with msgpack: {exc}") from exc
    if len(data) > limit:
        raise ValueError(f"payload is {len(data)} bytes, over max_payload_bytes={limit}")
    return data


def decode_payload(data: bytes | None) -> Any:
    if data is None:
        return None
    return msgpack.unpackb(data, raw=False, strict_map_key=False)
