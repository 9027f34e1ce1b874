"""bench (a plug-in found through an entry point) and the CLI's demo command line.

The plug-in tests install fake benchmark distributions the way pip would: a ``*.dist-info``
directory with an ``entry_points.txt`` on ``sys.path``. Named ``wheel_engine_bench`` and put
first, a fake shadows the real distribution when that is installed too.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from wheel_engine.cli import build_parser, main
from wheel_engine.cli.run import INSTALL_BENCH

FAKE_BENCH = textwrap.dedent(
    """
    import json, sys
    CALLS = []
    def main(argv):
        CALLS.append(list(argv))
        if "--help" in argv:
            print("usage: fake bench")
            raise SystemExit(0)
        return int(argv[argv.index("--exit") + 1]) if "--exit" in argv else 0
    """
)


def install_fake(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entry_points: str, module: str = ""
) -> None:
    """A distribution ``wheel_engine_bench`` with these entry points (and module), first on
    ``sys.path``."""
    info = tmp_path / "wheel_engine_bench-0.0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: wheel-engine-bench\nVersion: 0.0.1\n"
    )
    (info / "entry_points.txt").write_text(entry_points)
    if module:
        (tmp_path / "fake_bench.py").write_text(module)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "fake_bench", raising=False)


@pytest.fixture
def fake_bench(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """A benchmark plug-in whose main records its arguments; returns the record."""
    install_fake(
        tmp_path, monkeypatch, "[wheel_engine.bench]\ncompare = fake_bench:main\n", FAKE_BENCH
    )
    import fake_bench as module  # type: ignore[import-not-found]

    calls: list[list[str]] = module.CALLS
    return calls


def test_bench_passes_every_argument_through(fake_bench: list[list[str]]) -> None:
    assert main(["bench", "--quick", "--peers", "apscheduler", "-h"]) == 0
    assert main(["bench"]) == 0
    assert main(["bench", "--", "--help"]) == 0
    assert fake_bench == [["--quick", "--peers", "apscheduler", "-h"], [], ["--help"]]


def test_bench_exit_code_is_the_benchmark_s(fake_bench: list[list[str]]) -> None:
    assert main(["bench", "--quick", "--exit", "5"]) == 5


def test_bench_help_goes_to_the_plugin(
    fake_bench: list[list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bench", "--help"]) == 0
    assert capsys.readouterr().out.strip() == "usage: fake bench"


def test_bench_not_installed_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    install_fake(tmp_path, monkeypatch, "[console_scripts]\nother = os:getcwd\n")
    monkeypatch.chdir(tmp_path)  # a checkout's bench/ in the working directory is not used
    assert main(["bench", "--quick"]) == 1
    err = capsys.readouterr().err
    assert err.strip() == f"wheel-engine: error: the benchmarks are not installed: {INSTALL_BENCH}"
    assert main(["bench", "--help"]) == 0  # --help always works
    out = capsys.readouterr().out
    assert out.startswith("usage: wheel-engine bench") and "pip install wheel-engine-bench" in out


def test_bench_installed_but_broken_says_so_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    install_fake(
        tmp_path,
        monkeypatch,
        "[wheel_engine.bench]\ncompare = fake_bench:main\n",
        "import a_peer_that_is_not_installed\n",
    )
    assert main(["bench", "--quick"]) == 1
    err = capsys.readouterr().err
    assert "cannot be imported" in err and "a_peer_that_is_not_installed" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_the_library_never_imports_bench_nor_edits_sys_path(tmp_path: Path) -> None:
    """In a fresh interpreter whose benchmarks are not installed (a fake distribution without
    the entry point shadows them), even with a checkout's ``bench/`` beside the package."""
    info = tmp_path / "wheel_engine_bench-0.0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: wheel-engine-bench\nVersion: 0\n")
    script = textwrap.dedent(
        """
        import sys
        before = list(sys.path)
        from wheel_engine.cli import main
        import wheel_engine.cli.run, wheel_engine.cli.read, wheel_engine.cli.write
        import wheel_engine.demo
        assert main(["bench", "--help"]) == 0
        assert main(["bench", "--quick"]) == 1
        assert sys.path == before, (before, sys.path)
        assert not [m for m in sys.modules if m == "bench" or m.startswith("bench.")]
        print("clean")
        """
    )
    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=repo,
        env={"PYTHONPATH": f"{tmp_path}:{repo}", "PATH": "/usr/bin:/bin"},
    )
    assert done.stdout.strip().endswith("clean"), done.stdout + done.stderr


def test_demo_arguments() -> None:
    args = build_parser().parse_args(["demo", "--orders", "300", "--quick", "--seed", "7"])
    assert (args.orders, args.quick, args.seed, args.no_crash) == (300, True, 7, False)
    args = build_parser().parse_args(["demo"])
    assert (args.orders, args.quick) == (3000, False)


def test_console_script_is_installed_and_runs() -> None:
    exe = Path(sys.executable).with_name("wheel-engine")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "wheel_engine.cli"]
    done = subprocess.run([*cmd, "--version"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0
    assert done.stdout.startswith("wheel-engine ")
    done = subprocess.run(
        [*cmd, "status", "/nonexistent/x.db"], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 3
    assert done.stderr.strip() == "wheel-engine: error: /nonexistent/x.db: no such file"
