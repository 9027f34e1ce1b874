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


def _library_modules() -> list[str]:
    import pkgutil

    import journal

    names = []
    for package in (wheel_engine, journal):
        names.append(package.__name__)
        for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            if not info.name.rsplit(".", 1)[-1].startswith("__"):  # __main__: runs the CLI
                names.append(info.name)
    return names


def test_every_error_class_the_library_defines_sits_under_the_base() -> None:
    """Not only the exported ones: an error raised from a submodule (the cron parser, the web
    console's config, a journal row's shape) is caught by ``except WheelEngineError`` too. A
    private class (``_Bad``: a hot loop's signal to look again, never raised out) is exempt."""
    import importlib
    import inspect

    outside = []
    modules = _library_modules()
    assert len(modules) > 100  # the walk found the library, not an empty package
    for name in modules:
        try:
            module = importlib.import_module(name)
        except ImportError:  # an optional extra that is not installed here
            continue
        for cls_name, cls in inspect.getmembers(module, inspect.isclass):
            if (
                cls.__module__ == name
                and issubclass(cls, BaseException)
                and not cls_name.startswith("_")
                and not issubclass(cls, WheelEngineError)
            ):
                outside.append(f"{name}.{cls_name}")
    assert not outside, outside
