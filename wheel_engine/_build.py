"""The compiled core: which modules mypyc compiles, and whether this process runs them compiled.

This file is the one list of compiled modules. ``setup.py`` loads it by path (the package's own
imports are not installed while it builds), the ``Makefile`` runs it as a script to learn which
sources a rebuild depends on, and ``wheel_engine.COMPILED`` asks it what this process imported.
Adding a module to the compiled core is one line in :data:`COMPILED_MODULES`; the module must
type-check under ``mypy --strict`` (mypyc compiles what mypy has checked) and its tests must
pass on both builds (``docs/design.md``, "Compiled core", lists what compiled code does
differently).

The same ``.py`` files are the source of both builds: a compiled module is an extension module
(``.so``) next to its ``.py`` in the package directory, which Python imports in preference to
the ``.py``. Guaranteed: :func:`compiled_modules` tells, for each listed module, whether the
imported module is the extension. Not guaranteed: that an extension in a source checkout was
built from the ``.py`` beside it as it is now; :func:`stale_modules` names the ones older than
their source (``make`` rebuilds them).

Stdlib only, and nothing here imports ``wheel_engine`` at module level: ``setup.py`` executes
this file alone.
"""

from __future__ import annotations

import functools
import importlib
import importlib.machinery
import os
import sys
from pathlib import Path

#: The modules compiled with mypyc, grouped by top-level package (one shared library each).
#: The fire path's parts are here: interpreted engine code reading a compiled ``Timer`` pays a
#: descriptor call per attribute, so the code that touches timers per firing is compiled too.
#: Classes users subclass stay interpreted (mypyc refuses an interpreted subclass of a compiled
#: class): ``wheel_engine.clock`` (``SystemClock``) is not listed for that reason.
#: Not compiled yet: ``wheel_engine.commits`` (compiled, a failed commit's exception came back
#: from a later ``close()``: see ``docs/design.md``), the timer table and the engine itself.
COMPILED_MODULES: tuple[str, ...] = (
    "wheel_engine.wheel.entry",
    "wheel_engine.wheel.level",
    "wheel_engine.wheel.overflow",
    "wheel_engine.wheel.slots",
    "wheel_engine.wheel.staging",
    "wheel_engine.wheel.wheel",
    "wheel_engine.timer",
    "wheel_engine.retention",
    "wheel_engine.restoring",
    "wheel_engine.trigger",
    "wheel_engine.engine_keys",
    "wheel_engine.key_index",
    "wheel_engine.scheduling",
    "wheel_engine.front",
    "wheel_engine.bare_requests",
    "wheel_engine.inline",
    "wheel_engine.eager",
    "wheel_engine.plain_group",
    "wheel_engine.starting",
    "wheel_engine.dispatcher",
    "wheel_engine.firing",
    "wheel_engine.workers",
    "wheel_engine.outcomes",
    "wheel_engine.stats",
    "wheel_engine.events",
    "wheel_engine.handlers",
    "wheel_engine.retry",
    "wheel_engine.validation",
    "wheel_engine.payload",
    "journal.rules",
    "journal.codec",
    "journal.writer",
    "journal.fold",
)

#: Set to ``1`` at build time to build pure Python even where a C compiler and mypy are there.
PURE_ENV = "WHEEL_ENGINE_PURE"

#: The name, inside each package, of the shared library holding that package's compiled code;
#: mypyc appends ``__mypyc`` (``wheel_engine/_native__mypyc.cpython-311-....so``).
SHARED_LIBRARY = "_native"

#: The directory holding this file's package tree (a checkout's root, or site-packages).
ROOT = Path(__file__).resolve().parent.parent


def packages() -> list[str]:
    """The top-level packages with compiled modules, in first-listed order."""
    return list(dict.fromkeys(name.partition(".")[0] for name in COMPILED_MODULES))


def source_path(module: str, root: Path = ROOT) -> Path:
    """The ``.py`` file of a listed module under ``root``."""
    return root.joinpath(*module.split(".")).with_suffix(".py")


def groups(root: Path = ROOT) -> list[tuple[list[str], str]]:
    """mypyc's ``separate`` argument: per package, its sources and its shared library's name."""
    return [
        (
            [str(source_path(m, root)) for m in COMPILED_MODULES if m.partition(".")[0] == package],
            f"{package}.{SHARED_LIBRARY}",
        )
        for package in packages()
    ]


def is_extension(path: str | None) -> bool:
    """True for the file name of an extension module of this interpreter."""
    return path is not None and path.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))


def compiled_modules() -> dict[str, bool]:
    """For each listed module, whether the imported module is the compiled extension.

    Imports every listed module (they are imported by ``wheel_engine`` anyway).
    """
    return {
        name: is_extension(getattr(importlib.import_module(name), "__file__", None))
        for name in COMPILED_MODULES
    }


@functools.cache
def compiled() -> bool:
    """True when every listed module runs compiled (``wheel_engine.COMPILED``); computed once,
    so ``Engine.stats()`` can report it for free."""
    return all(compiled_modules().values())


def stale_modules(root: Path = ROOT) -> list[str]:
    """Listed modules whose extension under ``root`` is older than their ``.py`` source.

    An editable install keeps its extensions in the source tree, where Python imports them in
    preference to the ``.py``: an edit to the source is not seen until the next build.
    """
    stale = []
    for name in COMPILED_MODULES:
        source = source_path(name, root)
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            built = source.with_suffix(suffix)
            if built.exists() and built.stat().st_mtime < source.stat().st_mtime:
                stale.append(name)
    return stale


def _main(argv: list[str]) -> int:
    """``python wheel_engine/_build.py --sources``: the listed sources, one a line (for make)."""
    if argv != ["--sources"]:
        print("usage: python wheel_engine/_build.py --sources", file=sys.stderr)
        return 2
    for name in COMPILED_MODULES:
        print(os.path.relpath(source_path(name)))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
