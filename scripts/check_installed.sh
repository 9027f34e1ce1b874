#!/usr/bin/env bash
# The product from an installed wheel, not from a checkout (issue 9, "Done when"):
#
# 1. build the wheels of wheel-engine and of its benchmark plug-in (bench/);
# 2. install wheel-engine alone, non-editable, into a fresh virtual environment in /tmp;
# 3. from a directory outside the repository, with nothing of it on the path:
#    `wheel-engine --help`, `wheel-engine bench --help` (works without the benchmarks),
#    `wheel-engine bench --quick` (says in one line what to install, exit 1),
#    `wheel-engine demo --quick` (a real worker killed with SIGKILL and restarted);
# 4. install the benchmark wheel and check that `wheel-engine bench --help` reaches it.
#
# Usage: scripts/check_installed.sh [PYTHON]   (default python3.11; pip's cache makes it fast)
set -euo pipefail
# Nothing of a checkout on the path: with it pip would take the checkout for an installed copy.
unset PYTHONPATH
repo="$(cd "$(dirname "$0")/.." && pwd)"
py="${1:-python3.11}"
work="$(mktemp -d /tmp/wheel-engine-installed.XXXXXX)"
trap 'rm -rf "$work"' EXIT

step() { printf '\n== %s\n' "$*"; }
expect_exit() {  # expect_exit CODE command...: run it, show its output, check its exit code
    local want="$1"; shift
    set +e; "$@"; local got=$?; set -e
    if [ "$got" != "$want" ]; then
        echo "FAILED: '$*' exited $got, expected $want"; exit 1
    fi
}

step "building the wheels"
# from a copy of the working tree: a build writes *.egg-info and build/ into its source
mkdir "$work/src"
tar -C "$repo" --exclude=.git --exclude=.venv --exclude='*.egg-info' --exclude=build \
    --exclude=__pycache__ --exclude=bench/results -cf - . | tar -C "$work/src" -xf -
"$py" -m venv "$work/build-env"
"$work/build-env/bin/pip" install -q --upgrade pip
"$work/build-env/bin/pip" wheel -q --no-deps -w "$work/dist" "$work/src" "$work/src/bench"
ls "$work/dist"

step "a fresh virtual environment with the wheel-engine wheel only"
"$py" -m venv "$work/venv"
"$work/venv/bin/pip" install -q "$work"/dist/wheel_engine-*.whl
bin="$work/venv/bin"
outside="$work/elsewhere"
mkdir "$outside"
cd "$outside"
"$bin/python" -c "import wheel_engine, sys; print('wheel_engine from', wheel_engine.__file__)
assert wheel_engine.__file__.startswith(sys.prefix), 'not the installed copy'"

step "wheel-engine --help"
expect_exit 0 "$bin/wheel-engine" --help

step "wheel-engine bench --help (benchmarks not installed)"
expect_exit 0 "$bin/wheel-engine" bench --help

step "wheel-engine bench --quick (benchmarks not installed: one line, exit 1)"
expect_exit 1 "$bin/wheel-engine" bench --quick

step "wheel-engine demo --quick"
expect_exit 0 "$bin/wheel-engine" demo --quick --orders 500

step "the benchmark plug-in installed: wheel-engine bench --help reaches it"
"$bin/pip" install -q "$work"/dist/wheel_engine_bench-*.whl
expect_exit 0 "$bin/wheel-engine" bench --help

step "OK: the installed wheel works from $(pwd)"
