"""``bare_requests.bare_due``: a bare ``schedule_many`` request, recognised without the
request checker, must mean exactly what the checker makes of it, and leave everything else to it.
"""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from wheel_engine.bare_requests import NOT_BARE, bare_due
from wheel_engine.key_index import KeyIndex
from wheel_engine.validation import MAX_TIME, RequestChecker

NOW = 1_700_000_000.0
HANDLERS = {"h": object(), "émoji": object()}


class Name(str):
    """A str subclass: the checker copies it into a plain str, the fast path leaves it."""


numbers = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**400), max_value=10**400),
    st.sampled_from([0, 0.0, -0.0, MAX_TIME, MAX_TIME - NOW, MAX_TIME - NOW + 1e-3, True, 1 << 70]),
)
values = st.one_of(numbers, st.none(), st.text(max_size=3), st.just(Name("h")))
names = st.one_of(st.sampled_from(["h", "émoji", "", "nope"]), st.just(Name("h")), numbers)
fields = st.sampled_from(["handler", "at", "delay", "payload", "key", "on_conflict", "bogus"])
requests = st.one_of(
    st.fixed_dictionaries({"handler": names, "at": values}),
    st.fixed_dictionaries({"handler": names, "delay": values}),
    st.dictionaries(fields, st.one_of(values, names), max_size=4),
)


def checked(request: dict[str, Any]) -> Any:
    """What the checker makes of ``request``: its CheckedRequest, or the exception type."""
    checker = RequestChecker(HANDLERS, KeyIndex(), 1 << 20)
    try:
        return next(checker.each([request], NOW))
    except Exception as exc:  # the type is what is compared
        return type(exc)


@given(requests)
def test_a_plain_request_means_what_the_checker_makes_of_it(request: dict[str, Any]) -> None:
    due = bare_due(request, HANDLERS, NOW)
    if due == NOT_BARE:
        return  # the checker decides: nothing to compare
    valid = checked(request)
    assert not isinstance(valid, type), f"the checker rejects {request!r} with {valid}"
    assert (valid.handler, valid.due, valid.payload, valid.data, valid.key) == (
        request["handler"],
        due,
        None,
        None,
        None,
    )
    assert valid.on_conflict == "replace"
    assert type(valid.due) is float and type(due) is float


def test_the_common_shapes_are_plain() -> None:
    assert bare_due({"handler": "h", "at": 5}, HANDLERS, NOW) == 5.0
    assert bare_due({"handler": "h", "at": 5.5}, HANDLERS, NOW) == 5.5
    assert bare_due({"handler": "h", "delay": 2}, HANDLERS, NOW) == NOW + 2
    assert bare_due({"handler": "h", "delay": 0.5}, HANDLERS, NOW) == NOW + 0.5
    assert bare_due({"handler": "h", "at": MAX_TIME}, HANDLERS, NOW) == MAX_TIME


def test_anything_else_is_left_to_the_checker() -> None:
    others: list[Any] = [
        {"handler": "h", "at": 1.0, "payload": None},  # three keys
        {"handler": "h", "key": "k"},
        {"handler": "h", "at": None},
        {"handler": "h", "at": True},  # a bool is not a number here
        {"handler": "h", "at": -1.0},
        {"handler": "h", "at": math.nan},
        {"handler": "h", "at": MAX_TIME * 2},
        {"handler": "h", "delay": MAX_TIME - NOW + 1.0},  # due past MAX_TIME
        {"handler": "nope", "at": 1.0},  # unknown handler: the checker raises
        {"handler": "émoji", "at": 1.0},  # non-ASCII names: the checker checks the UTF-8
        {"handler": Name("h"), "at": 1.0},  # a str subclass: the checker copies it
        {"handler": "", "at": 1.0},
        {"at": 1.0, "delay": 1.0},
        [("handler", "h"), ("at", 1.0)],
        None,
    ]
    for request in others:
        assert bare_due(request, HANDLERS, NOW) == NOT_BARE, request


async def test_a_batch_mixing_plain_and_other_requests_keeps_its_order_and_versions() -> None:
    from wheel_engine import Engine
    from wheel_engine.testing import VirtualClock

    clock = VirtualClock()
    engine = Engine(None, clock=clock)
    fired: list[tuple[str, int, Any]] = []
    engine.register("h", lambda firing: fired.append((firing.key, firing.version, firing.payload)))
    async with engine:
        old = await engine.schedule("h", delay=9, key="live")
        mixed = [
            {"handler": "h", "delay": 1},  # plain
            {"handler": "h", "delay": 2, "payload": {"p": 1}},  # the checker's from here on
            {"handler": "h", "at": clock.time() + 3},  # plain again, after a non-plain one
        ]
        infos = await engine.schedule_many(mixed)
        replacing = await engine.schedule_many(
            [*mixed[:1], {"handler": "h", "delay": 4, "key": "live"}]
        )
        await clock.advance(10)
    assert [info.version for info in infos] == [old.version + 1, old.version + 2, old.version + 3]
    assert [info.payload for info in infos] == [None, {"p": 1}, None]
    assert replacing[1].key == "live" and replacing[1].version > infos[2].version
    assert len({info.key for info in [*infos, *replacing]}) == 5
    order = [infos[0], replacing[0], infos[1], infos[2], replacing[1]]  # by due, then version
    assert fired == [(info.key, info.version, info.payload) for info in order]
