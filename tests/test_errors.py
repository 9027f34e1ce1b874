"""One error base: everything the library raises is a ``WheelEngineError``, and the errors that
also mean a built-in's meaning are that built-in too, so older ``except`` clauses still work."""

from __future__ import annotations

import pytest

import wheel_engine
from journal.postgres.errors import LiveKeyConflict, StoreUnavailable
from wheel_engine import Engine, TimerNotFound, WheelEngineError
from wheel_engine.admin.protocol import AdminError, AdminUnavailable, ProtocolMismatch, RemoteError
from wheel_engine.cli.output import CliError


def test_every_public_error_sits_under_the_one_base() -> None:
    public = [
        value
        for name in wheel_engine.__all__
        if isinstance(value := getattr(wheel_engine, name), type) and issubclass(value, Exception)
    ]
    assert len(public) >= 8  # the names the contract lists, not an empty comprehension
    internal = [AdminError, AdminUnavailable, ProtocolMismatch, RemoteError, CliError]
    for error in public + internal + [StoreUnavailable, LiveKeyConflict]:
        assert issubclass(error, WheelEngineError), error


def test_the_errors_that_were_builtins_stay_builtins() -> None:
    assert issubclass(wheel_engine.UnknownHandler, LookupError)
    assert issubclass(wheel_engine.DuplicateKey, KeyError)
    assert issubclass(TimerNotFound, KeyError)


async def test_redrive_of_an_unknown_key_raises_timer_not_found_printed_as_key_error() -> None:
    async with Engine(None) as engine:
        with pytest.raises(TimerNotFound) as caught:
            await engine.redrive("no-such-key")
    assert str(caught.value) == str(KeyError("no-such-key"))
