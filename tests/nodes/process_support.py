"""Node processes for test_nodes_processes.py: spawn ``node_process.py``, send it commands, pause,
kill and stop it, and read the firing logs and the database."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from node_support import sql

WORKER = Path(__file__).with_name("node_process.py")
ROOT = Path(__file__).resolve().parents[2]
#: Seconds a node process may take to open its engine, or to answer one command.
PATIENCE = 30.0
#: The partition count of the journal the engines create (the store's default).
PARTITIONS = 64


class NodeProcess:
    """One ``node_process.py``; its stdout lines arrive on a queue (a thread reads them)."""

    def __init__(
        self, url: str, name: str, lease: float, log: Path, limits: dict[str, Any] | None = None
    ) -> None:
        self.name = name
        self.log = log
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        if limits is not None:  # the "capped" handler's flow-control options
            env["WHEEL_TEST_LIMITS"] = json.dumps(limits)
        argv = [sys.executable, str(WORKER), url, name, str(lease), str(log)]
        self.proc = subprocess.Popen(
            argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        self._lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)

    def reply(self) -> dict[str, Any]:
        try:
            line = self._lines.get(timeout=PATIENCE)
        except queue.Empty:
            raise AssertionError(f"node {self.name} did not answer within {PATIENCE} s") from None
        return dict(json.loads(line))

    def ready(self) -> None:
        assert self.reply() == {"ready": self.name}

    def ask(self, op: str, **args: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"op": op, **args}).encode() + b"\n")
        self.proc.stdin.flush()
        return self.reply()

    def schedule(self, requests: list[dict[str, Any]]) -> dict[str, int]:
        """Schedule through this node's engine; key -> version, once committed."""
        return {
            key: version
            for key, version in self.ask("schedule_many", requests=requests)["scheduled"]
        }

    def cancel(self, key: str, version: int | None = None) -> str:
        return str(self.ask("cancel", key=key, version=version)["cancel"])

    def signal(self, sig: signal.Signals) -> None:
        self.proc.send_signal(sig)

    def stop(self) -> None:
        """SIGTERM (after SIGCONT, should it be paused) and wait; a clean exit unless killed."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.send_signal(signal.SIGTERM)
        try:
            _, err = self.proc.communicate(timeout=PATIENCE)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
            raise AssertionError(f"node {self.name} did not stop: {err.decode()}") from None
        assert self.proc.returncode in (0, -signal.SIGKILL), err.decode()


def start_nodes(
    url: str, names: list[str], lease: float, logs: Path, limits: dict[str, Any] | None = None
) -> list[NodeProcess]:
    """Node processes started together, once every one of them runs its engine."""
    nodes = [NodeProcess(url, name, lease, logs / f"{name}.log", limits) for name in names]
    for node in nodes:
        node.ready()
    return nodes


def stop_nodes(nodes: list[NodeProcess]) -> None:
    errors = []
    for node in nodes:
        try:
            node.stop()
        except AssertionError as exc:
            errors.append(str(exc))
    assert not errors, errors


def wait_for(what: str, check: Callable[[], bool], timeout: float = PATIENCE) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def firings(nodes: list[NodeProcess]) -> list[dict[str, Any]]:
    """Every node's logged firings (a killed node's last line may be cut: it is skipped)."""
    lines = []
    for node in nodes:
        if node.log.exists():
            for text in node.log.read_text().splitlines():
                with contextlib.suppress(json.JSONDecodeError):
                    lines.append(json.loads(text))
    return lines


def owners(url: str) -> dict[int, str]:
    """partition -> owner, for the partitions whose lease is valid by the database's clock."""
    rows = sql(
        url,
        "SELECT partition, owner FROM wheel_partitions"
        " WHERE owner IS NOT NULL AND lease_until > extract(epoch FROM now())",
    )
    return dict(rows)


def shared_by(url: str, names: list[str]) -> bool:
    """Every partition held, by these nodes only, none beyond the fair share (so each holds
    some: 64 over three nodes settles at 22/22/20 or 22/21/21)."""
    held = owners(url)
    share = -(-PARTITIONS // len(names))
    counts = [list(held.values()).count(name) for name in names]
    return len(held) == PARTITIONS and sum(counts) == PARTITIONS and max(counts) <= share


def partitions_of(url: str, name: str) -> set[int]:
    return {p for p, owner in owners(url).items() if owner == name}


def rows(url: str) -> dict[str, dict[str, Any]]:
    """key -> the row's version, state code, attempts, due and first attempt time."""
    found = sql(
        url, "SELECT key, version, state, attempts, due, first_attempt_at FROM wheel_timers"
    )
    names = ("version", "state", "attempts", "due", "first_attempt_at")
    return {key: dict(zip(names, rest, strict=True)) for key, *rest in found}
