"""bench (delegates to bench.compare.main) and the CLI's demo command line."""

from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

import pytest

from wheel_engine.cli import build_parser, main
from wheel_engine.cli.output import CliError
from wheel_engine.cli.run import load_bench


def fake_bench(monkeypatch: pytest.MonkeyPatch, result: int = 0) -> list[list[str]]:
    calls: list[list[str]] = []

    def fake_main(argv: list[str]) -> int:
        calls.append(argv)
        return result

    package = types.ModuleType("bench")
    package.__path__ = []
    module = types.ModuleType("bench.compare")
    module.main = fake_main  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "bench", package)
    monkeypatch.setitem(sys.modules, "bench.compare", module)
    return calls


def test_bench_passes_every_argument_through(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = fake_bench(monkeypatch)
    assert main(["bench", "--quick", "--peers", "apscheduler", "-h"]) == 0
    assert main(["bench"]) == 0
    assert main(["bench", "--", "--help"]) == 0
    assert calls == [["--quick", "--peers", "apscheduler", "-h"], [], ["--help"]]


def test_bench_exit_code_is_the_benchmark_s(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_bench(monkeypatch, result=5)
    assert main(["bench", "--quick"]) == 5


def test_bench_outside_a_checkout_says_so(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "bench", None)  # import bench -> ImportError
    with pytest.raises(CliError, match="from a clone of the repository"):
        load_bench(roots=[tmp_path])
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("wheel_engine.cli.run.load_bench", lambda: load_bench(roots=[tmp_path]))
    assert main(["bench", "--quick"]) == 3
    err = capsys.readouterr().err
    assert "clone of the repository" in err and "Traceback" not in err


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


def test_bench_is_found_next_to_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    repo = Path(__file__).resolve().parents[2]
    if not (repo / "bench" / "compare").exists():
        pytest.skip("no bench/compare in this checkout")
    for name in [m for m in sys.modules if m == "bench" or m.startswith("bench.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if Path(p or ".").resolve() != repo])
    monkeypatch.chdir("/")
    bench_main = load_bench(roots=[repo])
    assert callable(bench_main)
    assert main(["bench", "--help"]) == 0
