"""Build hook: compile the modules listed in ``wheel_engine/_build.py`` with mypyc, or don't.

Everything else about the distribution is in ``pyproject.toml``; this file only adds the
extension modules. The build is pure Python (the same ``.py`` files, no extension) when

* ``WHEEL_ENGINE_PURE=1`` is set (for debugging, and for CI's second pass), or
* mypy (which ships mypyc) cannot be imported (a ``--no-build-isolation`` build without it), or
* no working C compiler with this interpreter's headers is found (probed by compiling a file
  that includes ``Python.h``).

Otherwise mypyc compiles, one shared library per package (``wheel_engine/_native__mypyc...so``,
``journal/_native__mypyc...so``) and one small extension per module next to its ``.py``, so a
wheel and an editable install (``pip install -e .``, which copies them into the source tree)
both find them. A type error mypyc reports or a C compiler error is not a reason to fall back:
the build fails, so a broken compiled core is never shipped as a silent pure one.

An in-place build (an editable install, or ``setup.py build_ext --inplace``) first deletes the
extension modules a previous one left in the source tree: Python imports an extension in
preference to the ``.py`` beside it, so a stale one would shadow the pure build, or a module
taken off the list. Any other build (``pip wheel .``, ``pip install .``) leaves the source tree
alone, so building a wheel from a checkout never turns that checkout's editable install into
pure Python; it builds in its build directory, from which it first deletes the extensions a
previous build left there (a pure wheel must not pick up a compiled build's leftovers).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

from setuptools import setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py
from setuptools.command.editable_wheel import editable_wheel

HERE = Path(__file__).resolve().parent


def load_build_list() -> ModuleType:
    """``wheel_engine/_build.py`` executed alone: importing ``wheel_engine`` needs its
    dependencies, which a build environment does not have."""
    spec = importlib.util.spec_from_file_location(
        "_wheel_engine_build", HERE / "wheel_engine" / "_build.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def remove_old_extensions(packages: list[str], root: Path = HERE) -> list[Path]:
    """Delete every extension module under the packages' source directories; return them."""
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    removed = []
    for package in packages:
        for path in (root / package).rglob("*"):
            if path.name.endswith(suffixes):
                path.unlink()
                removed.append(path)
    return removed


def why_pure() -> str | None:
    """The reason to build pure Python, or None to compile."""
    if os.environ.get("WHEEL_ENGINE_PURE", "") not in ("", "0"):
        return "WHEEL_ENGINE_PURE is set"
    if importlib.util.find_spec("mypyc") is None:
        return "mypy (mypyc) is not installed"
    return compiler_problem()


def compiler_problem() -> str | None:
    """None when a C compiler builds a file including ``Python.h``, else what went wrong."""
    from setuptools._distutils.ccompiler import new_compiler
    from setuptools._distutils.sysconfig import customize_compiler, get_python_inc

    compiler: Any = new_compiler()
    customize_compiler(compiler)
    with tempfile.TemporaryDirectory() as tmp:
        probe = Path(tmp) / "probe.c"
        probe.write_text("#include <Python.h>\nint probe(void) { return 0; }\n")
        try:
            compiler.compile([str(probe)], output_dir=tmp, include_dirs=[get_python_inc()])
        except Exception as exc:  # a probe: any failure means no working compiler
            return f"no working C compiler ({exc})"
    return None


def compiled_extensions(build: ModuleType) -> list[Any]:
    """The mypyc extensions: the listed modules, one shared library per package."""
    from mypyc.build import mypycify

    sources = [
        str(build.source_path(name, HERE).relative_to(HERE)) for name in build.COMPILED_MODULES
    ]
    groups = [
        ([str(Path(p).relative_to(HERE)) for p in files], name)
        for files, name in build.groups(HERE)
    ]
    return mypycify(sources, only_compile_paths=sources, separate=groups, opt_level="3")


def extensions() -> list[Any]:
    reason = why_pure()
    if reason is not None:
        print(f"wheel-engine: building pure Python: {reason}", file=sys.stderr)
        return []
    print(
        "wheel-engine: compiling the core with mypyc (about a minute; "
        "WHEEL_ENGINE_PURE=1 builds pure Python at once)",
        file=sys.stderr,
    )
    return compiled_extensions(load_build_list())


def remove_shadowing_extensions(root: Path) -> None:
    """Before a build writes extensions into ``root``: delete those a previous build left."""
    remove_old_extensions(load_build_list().packages(), root)


class CleanBuildPy(build_py):
    """``build_py`` that first empties the build directory of earlier builds' extensions."""

    def run(self) -> None:
        remove_shadowing_extensions(Path(self.build_lib))
        super().run()


class CleanEditableWheel(editable_wheel):
    """An editable install imports from the source tree: its stale extensions go first (a pure
    editable build has no ``build_ext`` step to do it)."""

    def run(self) -> None:
        remove_shadowing_extensions(HERE)
        super().run()


class StampedBuildExt(build_ext):
    """``build_ext`` whose in-place copies carry the time of this build.

    setuptools copies an extension into the source tree with its build time preserved, and does
    not rebuild a module's small extension when only its source changed (the code is in the
    package's shared library): that copy would look older than its ``.py`` to
    ``wheel_engine._build.stale_modules`` although it is up to date.
    """

    def finalize_options(self) -> None:
        super().finalize_options()
        if self.parallel is None:  # two shared libraries and the modules' shims: compile at once
            self.parallel = os.cpu_count() or 1

    def run(self) -> None:
        if self.inplace:  # editable, or ``build_ext --inplace``: the copies land in the tree
            remove_shadowing_extensions(HERE)
        super().run()

    def copy_extensions_to_source(self) -> None:
        super().copy_extensions_to_source()
        for ext in self.extensions:
            built = Path(self.get_ext_fullpath(ext.name))
            if built.exists():
                os.utime(built)


if __name__ == "__main__":  # setuptools runs this file as __main__; tests import it
    setup(
        ext_modules=extensions(),
        cmdclass={
            "build_ext": StampedBuildExt,
            "build_py": CleanBuildPy,
            "editable_wheel": CleanEditableWheel,
        },
    )
