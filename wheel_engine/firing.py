"""The :class:`~wheel_engine.model.Firing` an attempt's handler gets, built in one place.

Every way a committed attempt runs (:mod:`wheel_engine.dispatcher`: inline, a plain group, a
worker task) builds its handler's argument with :func:`firing_for`, which also counts the firing
(with its lateness) and emits ``fired`` to a subscriber. Guaranteed: one firing counted and at
most one ``fired`` event per attempt started, and the payload decoded only now, as the handler
is about to get it.
"""

from __future__ import annotations

from typing import Final

from wheel_engine.events import EventBus
from wheel_engine.model import Firing
from wheel_engine.stats import Counters
from wheel_engine.timer import UNDECODED, Timer

_new_tuple: Final = tuple.__new__
# Final: compiled code reads these from C statics, not from the module's dict on every firing.
_FIRING: Final = Firing


def firing_for(timer: Timer, now: float, stats: Counters, events: EventBus) -> Firing:
    """The firing of ``timer``'s attempt starting ``now`` (charged already); counted, and
    emitted as ``fired`` if anyone listens."""
    stats.count_firing(now - timer.due)
    if events.active:
        events.fired(timer, now)
    payload = timer.payload
    if payload is UNDECODED:
        payload = timer.decode_payload()
    serial = timer.serial  # Timer.key, inline: a property is a Python call in the pure build
    key = timer.key_base if not serial else f"{timer.key_base}-{serial}"
    return _new_tuple(  # NamedTuple's own __new__ is a Python function: skip it
        _FIRING, (key, timer.version, timer.handler, payload, timer.due, timer.attempts, now)
    )
