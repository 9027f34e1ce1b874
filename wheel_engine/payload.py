"""The payload codec: how a timer's payload becomes bytes in the journal and comes back.

A payload is msgpack, never pickle: decoding runs no code. :func:`encode_payload` accepts only a
value that decodes back to one that encodes to the very same bytes, so what a handler gets is
the same before and after a restart. A leaf module: the request checks and the timer both use
it, and it imports nothing of the engine's.
"""

from __future__ import annotations

from typing import Any

import msgpack

# One packer for every payload: packing runs no Python code (payload values are builtins or
# their subclasses, packed at C level), so it never releases the GIL: safe from any thread.
_pack = msgpack.Packer(use_bin_type=True, autoreset=True).pack


def encode_payload(payload: Any, limit: Any) -> tuple[bytes, Any]:
    """``(msgpack bytes, decoded value)`` of a payload that is not None.

    ``TypeError`` if msgpack cannot encode it or it would not decode back to the same value (a
    dict with tuple keys: they come back as lists, which cannot be keys); ``ValueError`` if the
    bytes are over ``limit``. The round trip costs one decode (plus a re-encode when the decoded
    value does not compare equal, e.g. tuples or NaN): docs/design.md, "Bad input", has its cost.
    """
    try:
        data: bytes = _pack(payload)
    except (TypeError, ValueError, OverflowError) as exc:
        raise TypeError(f"payload cannot be encoded with msgpack: {exc}") from exc
    if len(data) > limit:
        raise ValueError(f"payload is {len(data)} bytes, over max_payload_bytes={limit}")
    try:
        decoded = decode_payload(data)
    except Exception as exc:  # msgpack raises several unrelated types
        raise TypeError(f"payload would not decode back after a restart: {exc}") from exc
    if not _same(decoded, payload) and _pack(decoded) != data:
        raise TypeError("payload would not decode back equal after a restart")
    return data, decoded


def _same(decoded: Any, payload: Any) -> bool:
    try:
        return bool(decoded == payload)
    except Exception:  # a subclass's __eq__ may raise: fall back to comparing the bytes
        return False


def decode_payload(data: bytes | None) -> Any:
    """The value a payload's msgpack bytes hold (None for no payload): what handlers get."""
    if data is None:
        return None
    return msgpack.unpackb(data, raw=False, strict_map_key=False)
