"""The compiled core and its pure-Python fallback (``setup.py``, ``wheel_engine/_build.py``).

The rest of the suite is the same on both builds; CI runs it on each (``.ci/run``). These tests
check that the build that runs is the one named: ``wheel_engine.COMPILED``, ``--version``, the
extension modules inside their packages, none older than its source, and that a build without
a C compiler or with ``WHEEL_ENGINE_PURE=1`` is pure. ``WHEEL_ENGINE_EXPECT_BUILD`` (``compiled``
or ``pure``), set by CI, says which build this run must be.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import math
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from types import ModuleType

import pytest

import wheel_engine
from wheel_engine import _build
from wheel_engine.cli import build_parser
from wheel_engine.key_index import KeyIndex
from wheel_engine.timer import Timer
from wheel_engine.validation import RequestChecker, check_engine_options, check_version, due_time
from wheel_engine.wheel import TimingWheel

ROOT = Path(__file__).resolve().parents[1]
SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]


def load_setup() -> ModuleType:
    """``setup.py`` as a module: its ``setup()`` call only runs as ``__main__``."""
    spec = importlib.util.spec_from_file_location("wheel_engine_setup", ROOT / "setup.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_listed_module_runs_from_the_same_build() -> None:
    imported = _build.compiled_modules()
    assert set(imported) == set(_build.COMPILED_MODULES)
    # A mix means a partial or stale build: some modules compiled, others not.
    assert len(set(imported.values())) == 1, imported
    assert wheel_engine.COMPILED is all(imported.values())


def test_the_build_is_the_one_expected() -> None:
    expected = os.environ.get("WHEEL_ENGINE_EXPECT_BUILD")
    if not expected:
        pytest.skip("WHEEL_ENGINE_EXPECT_BUILD is not set (CI sets it)")
    assert expected in ("compiled", "pure")
    assert wheel_engine.COMPILED is (expected == "compiled")


@pytest.mark.skipif(not wheel_engine.COMPILED, reason="the pure-Python build is running")
def test_compiled_modules_are_extensions_inside_their_packages() -> None:
    import wheel_engine.wheel.wheel

    assert wheel_engine.wheel.wheel.__file__ is not None
    assert wheel_engine.wheel.wheel.__file__.endswith(SUFFIX)
    for name in _build.COMPILED_MODULES:
        assert str(sys.modules[name].__file__).endswith(SUFFIX), name
        # Beside its .py in the package directory (the modules that compiled code imports first
        # get a __file__ that mypyc derives wrongly, see docs/design.md: look at the files).
        assert _build.source_path(name).with_suffix(SUFFIX).is_file(), name
    for package in _build.packages():
        library = sys.modules[f"{package}.{_build.SHARED_LIBRARY}__mypyc"]
        package_dir = Path(str(sys.modules[package].__file__)).parent
        assert (
            Path(str(library.__file__)) == package_dir / f"{_build.SHARED_LIBRARY}__mypyc{SUFFIX}"
        )


def test_a_timer_comes_out_of_the_wheel_as_itself() -> None:
    # Timer overrides WheelEntry.item with a property; compiled code reads a base attribute
    # from its native slot, so with ``item`` an attribute the compiled wheel raised
    # AttributeError here (WheelEntry.item is a property for that reason).
    wheel: TimingWheel[Timer] = TimingWheel(now_tick=0)
    timer = Timer("k", 1, "h", 0.005, None)
    timer.tick = 5
    wheel.insert_entry(timer)
    assert wheel.advance(10) == [timer]
    assert wheel.insert(3, 2, "plain").item == "plain"


def test_a_user_can_subclass_the_system_clock() -> None:
    """Users adapt the engine's time source by subclassing ``SystemClock`` (a clock that runs
    ahead, one that counts calls): a compiled class would refuse an interpreted subclass."""
    from wheel_engine.clock import SystemClock

    class Ahead(SystemClock):
        def time(self) -> float:
            return super().time() + 1.0

    assert Ahead().time() > SystemClock().time()


class Named(str):
    """A ``str`` subclass whose ``__str__`` lies: the checks must take the ``str`` it holds."""

    def __str__(self) -> str:
        return "not-this"


CHECK = RequestChecker(
    {"h": None}, KeyIndex(), 100.5
)  # a float limit: the engine never checks its type
NAIVE = datetime(2020, 1, 1)  # no time zone: the point
#: Bad input and what it raises, the same on both builds. Compiled, an annotation narrower
#: than ``object``/``Any`` would raise mypyc's own ``TypeError`` for each of these instead.
VALIDATION_CONTRACT: list[tuple[Callable[[], object], type[Exception], str]] = [
    (
        lambda: CHECK.request(1, None, 1, None, None, "replace", 0.0),
        TypeError,
        "handler must be a str, not int",
    ),
    (
        lambda: CHECK.request("h", None, 1, None, b"k", "replace", 0.0),
        TypeError,
        "key must be a str, not bytes",
    ),
    (
        lambda: CHECK.request("h", None, 1, None, "\ud800", "replace", 0.0),
        ValueError,
        "key '\\ud800' cannot be encoded as UTF-8: surrogates not allowed",
    ),
    (
        lambda: CHECK.request("h", None, 1, None, None, 1, 0.0),
        ValueError,
        "on_conflict must be one of ('replace', 'keep', 'error'), not 1",
    ),
    (
        lambda: CHECK.request("h", None, "1", None, None, "replace", 0.0),
        TypeError,
        "delay= must be a number of seconds, not str",
    ),
    (
        lambda: CHECK.request("h", None, True, None, None, "replace", 0.0),
        TypeError,
        "delay= must be a number of seconds, not bool",
    ),
    (
        lambda: CHECK.request("h", math.nan, None, None, None, "replace", 0.0),
        ValueError,
        "at= must be finite, not nan",
    ),
    (
        lambda: CHECK.request("h", 10**400, None, None, None, "replace", 0.0),
        ValueError,
        f"at= is out of range: {10**400!r}",
    ),
    (
        lambda: CHECK.request("h", NAIVE, None, None, None, "replace", 0.0),
        ValueError,
        "at= must be an aware datetime (it has no time zone)",
    ),
    (
        lambda: CHECK.request("h", 1, 1, None, None, "replace", 0.0),
        ValueError,
        "give exactly one of at= and delay=",
    ),
    (
        lambda: CHECK.request("h", None, 1, "x" * 200, None, "replace", 0.0),
        ValueError,
        "payload is 202 bytes, over max_payload_bytes=100.5",
    ),
    (
        lambda: CHECK.request("h", None, 1, {(1,): 2}, None, "replace", 0.0),
        TypeError,
        "payload would not decode back after a restart: unhashable type: 'list'",
    ),
    (
        lambda: CHECK.batch(5, 0.0),
        TypeError,  # type: ignore[arg-type]
        "'int' object is not iterable",
    ),
    (lambda: CHECK.batch(["h"], 0.0), TypeError, "schedule_many takes mappings, not str"),
    (lambda: due_time(0.0, "1", None), TypeError, "at= must be a number of seconds, not str"),
    (lambda: check_version("1"), TypeError, "version must be an int, not str"),
    (
        lambda: check_engine_options("x", "full", 1, 1, 1, 4096),
        TypeError,
        "'>' not supported between instances of 'str' and 'int'",
    ),
]


@pytest.mark.parametrize("call, error, message", VALIDATION_CONTRACT)
def test_validation_raises_the_same_error_on_both_builds(
    call: Callable[[], object], error: type[Exception], message: str
) -> None:
    with pytest.raises(Exception) as raised:  # the exact type: checked below
        call()
    assert (type(raised.value), str(raised.value)) == (error, message)


def test_validation_is_compiled_and_takes_what_it_took_interpreted() -> None:
    """``validation.py`` is on the compiled list (schedule()'s checks, ~8k instructions a call
    interpreted), and accepts what it accepted interpreted: a ``str`` subclass as the plain
    ``str`` it holds, an int clock reading kept an int, a generator of requests, a float
    ``max_concurrency``."""
    assert "wheel_engine.validation" in _build.COMPILED_MODULES
    request = CHECK.request(Named("h"), None, 1, None, Named("k"), "keep", 10)
    assert (type(request.handler), type(request.key)) == (str, str)
    assert (request.handler, request.key, request.due) == ("h", "k", 11)
    assert type(request.due) is int
    requests = ({"handler": "h", "delay": d} for d in (1, 2.5))
    assert [r.due for r in CHECK.batch(requests, 1.0)] == [2.0, 3.5]
    check_engine_options(0.5, "full", 1.5, math.inf, 0, 4096)


def test_no_compiled_module_is_older_than_its_source() -> None:
    stale = _build.stale_modules()
    assert not stale, f"rebuild (make, or pip install -e .): {stale} changed since their build"


def test_version_names_the_build(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--version"])
    build = "compiled" if wheel_engine.COMPILED else "pure Python"
    assert capsys.readouterr().out.strip() == f"wheel-engine {wheel_engine.__version__} ({build})"


def test_one_shared_library_per_package_holds_its_modules() -> None:
    groups = _build.groups()
    assert [name for _, name in groups] == [f"{p}._native" for p in _build.packages()]
    assert set(_build.packages()) == {"wheel_engine", "journal"}
    grouped = [Path(path) for files, _ in groups for path in files]
    assert sorted(grouped) == sorted(_build.source_path(m) for m in _build.COMPILED_MODULES)
    for files, name in groups:
        package = name.partition(".")[0]
        assert all(Path(path).is_relative_to(ROOT / package) for path in files)


def test_the_list_is_read_without_importing_the_package() -> None:
    # What setup.py and the Makefile do: stdlib only, nothing of the package's dependencies.
    listed = subprocess.run(
        [sys.executable, "-I", "wheel_engine/_build.py", "--sources"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert listed == [str(_build.source_path(m).relative_to(ROOT)) for m in _build.COMPILED_MODULES]
    assert all((ROOT / path).is_file() for path in listed)


def test_pure_is_forced_by_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    setup = load_setup()
    monkeypatch.setenv("WHEEL_ENGINE_PURE", "1")
    assert setup.why_pure() == "WHEEL_ENGINE_PURE is set"
    monkeypatch.setenv("WHEEL_ENGINE_PURE", "0")
    assert setup.why_pure() != "WHEEL_ENGINE_PURE is set"


def test_a_missing_compiler_means_pure(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("WHEEL_ENGINE_PURE", raising=False)
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    reason = load_setup().compiler_problem()
    assert reason is not None and reason.startswith("no working C compiler")


def test_every_build_removes_the_extensions_a_previous_one_left(tmp_path: Path) -> None:
    # An extension shadows the .py beside it: left over, it would hide a pure build's sources.
    package = tmp_path / "pkg" / "sub"
    package.mkdir(parents=True)
    (package / "mod.py").write_text("")
    old = [package / f"mod{SUFFIX}", tmp_path / "pkg" / f"_native__mypyc{SUFFIX}"]
    for path in old:
        path.write_bytes(b"")
    removed = load_setup().remove_old_extensions(["pkg"], tmp_path)
    assert sorted(removed) == sorted(old)
    assert not any(path.exists() for path in old)
    assert (package / "mod.py").exists()


def copy_of_the_tree(tmp_path: Path) -> Path:
    """The checkout without its VCS, venv, build output and benchmarks, with its extensions."""
    source = tmp_path / "src"
    ignore = shutil.ignore_patterns(
        ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", "bench", "site"
    )
    shutil.copytree(ROOT, source, ignore=ignore)
    return source


def build_wheel(source: Path, out: Path, **env_changes: str) -> Path:
    """``pip wheel --no-deps`` of ``source`` as a user runs it (build isolation and all)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "WHEEL_ENGINE_PURE")}
    env.update(env_changes)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(source)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    (wheel,) = out.glob("wheel_engine-*.whl")
    return wheel


def extensions_under(root: Path) -> dict[str, bytes]:
    """Every extension module in the packages under ``root``, by path, with its bytes."""
    return {
        str(path.relative_to(root)): path.read_bytes()
        for package in _build.packages()
        for path in sorted((root / package).rglob(f"*{SUFFIX}"))
    }


@pytest.mark.slow
def test_a_build_without_a_c_compiler_is_a_pure_wheel(tmp_path: Path) -> None:
    source = copy_of_the_tree(tmp_path)
    for path in extensions_under(source):
        (source / path).unlink()
    # An extension an editable install left in the tree stays (a wheel build is not in place);
    # one an earlier build left in the build directory does not reach this pure wheel.
    in_tree = source / "wheel_engine" / "wheel" / f"wheel{SUFFIX}"
    in_tree.write_bytes(b"an editable install's")
    left_in_build = source / "build" / "lib" / "wheel_engine" / "wheel" / f"wheel{SUFFIX}"
    left_in_build.parent.mkdir(parents=True)
    left_in_build.write_bytes(b"an earlier build's")
    wheel = build_wheel(source, tmp_path, CC=str(tmp_path / "no-such-cc"))
    assert wheel.name.endswith("-py3-none-any.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "wheel_engine/wheel/wheel.py" in names
    assert "wheel_engine/_build.py" in names
    assert not [name for name in names if name.endswith(".so")]
    assert in_tree.read_bytes() == b"an editable install's"


@pytest.mark.slow
@pytest.mark.skipif(
    os.environ.get("WHEEL_ENGINE_EXPECT_BUILD") != "compiled",
    reason="compiles with mypyc (a minute): runs in CI's compiled pass, "
    "WHEEL_ENGINE_EXPECT_BUILD=compiled",
)
def test_a_compiled_wheel_build_leaves_the_checkouts_compiled_modules(tmp_path: Path) -> None:
    """``pip wheel .`` in a checkout with a compiled editable install once deleted that
    install's extensions: ``make test`` went on pure without a word."""
    assert wheel_engine.COMPILED
    source = copy_of_the_tree(tmp_path)
    before = extensions_under(source)
    assert len(before) == len(_build.COMPILED_MODULES) + len(_build.packages())
    wheel = build_wheel(source, tmp_path / "dist")
    assert extensions_under(source) == before
    names = zipfile.ZipFile(wheel).namelist()
    for name in _build.COMPILED_MODULES:
        assert str(_build.source_path(name, Path()).with_suffix(SUFFIX)) in names, name
