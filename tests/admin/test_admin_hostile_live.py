"""Random and adversarial requests at a live engine's admin socket while its timers fire.

The engine runs on a real clock in a child process (``serve_hostile.py``), scheduling a timer
every 5 ms that fires 50 ms later; hypothesis throws requests at its socket: well-formed ones
with random arguments (wrong types, NaN, infinities, unknown names, big integers), and
adversarial bytes (deep nesting, non-UTF-8, oversized, no newline, random binary). Checked:

- every request gets exactly one answer line, a JSON object of protocol version 1;
- a rejected request changes nothing: the digest of what the journal holds for every key but
  the background timers' is the same before and after it;
- timers stay on time meanwhile: lateness p99 under 50 ms more than that of a bare asyncio loop
  running the same timers beside it (``loop_anchor.py``), so what is judged is what the engine
  and its admin server add (a request that held the loop for 50 ms makes ten background timers
  that late, over the p99 of ~1,000). Where the bare loop's own p99 is over 20 ms the machine is
  too loaded to judge (the engine's busy process gets a fraction of a core, its lateness grows
  with all it does: 135 ms beside the bare loop's 39 ms at a load of 8 on 2 cores, with nothing
  wrong): the test then skips, saying so, after every other check has passed;
- descriptors do not leak: the process holds as many once the connections are done.

A few seconds in CI (300 examples); ``WHEEL_ENGINE_SOAK=1`` runs 5,000.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from raw_client import exchange

from journal.recovery import recover_sync
from wheel_engine.admin import admin_path

EXAMPLES = 5000 if os.environ.get("WHEEL_ENGINE_SOAK") == "1" else 300
BACKGROUND = "bg-"
#: A bare loop's lateness p99 above which the machine is too loaded to judge the engine's: its
#: busy process then gets a fraction of a core, and its lateness grows with everything it does.
NOISY = 0.02


SCRIPT = Path(__file__).with_name("serve_hostile.py")
ANCHOR = Path(__file__).with_name("loop_anchor.py")
ROOT = Path(__file__).resolve().parents[2]


def await_ready(proc: subprocess.Popen[str], what: str) -> None:
    """Wait for the child's ``READY`` line (bounded: it prints it or exits)."""
    assert proc.stdout is not None
    if not proc.stdout.readline().startswith("READY"):
        proc.kill()
        proc.wait()
        raise AssertionError(f"{what} did not start")


def stop(proc: subprocess.Popen[str]) -> None:
    """SIGTERM, and a kill if the child has not ended within 20 s."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(20.0)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()


class LiveEngine:
    """The engine of ``serve_hostile.py`` in a child process (no GIL shared with the test)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
        with open(f"{path}.stderr", "wb") as err:  # shown when the engine dies
            self.proc = subprocess.Popen(
                [sys.executable, str(SCRIPT), str(path)],
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                env=env,
            )
        await_ready(self.proc, "the engine")

    def close(self) -> list[float]:
        """SIGTERM, and the lateness of every background firing."""
        stop(self.proc)
        return list(json.loads(Path(f"{self.path}.lateness").read_text()))

    def digest(self) -> str:
        """What the journal holds for every key but the background timers'. A timer that fires
        (PENDING -> SUCCEEDED) is the engine's doing, not a request's: those states count as one."""
        timers = recover_sync(str(self.path)).timers
        rows = sorted(
            (k, r.version, r.handler, r.due, r.payload, r.state == "CANCELED")
            for k, r in timers.items()
            if not k.startswith(BACKGROUND)
        )
        return hashlib.sha256(repr(rows).encode()).hexdigest()

    def open_fds(self) -> int:
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def log(self) -> str:
        """Whether the engine still runs, and the end of what it wrote to stderr."""
        state = "running" if self.proc.poll() is None else f"exited {self.proc.returncode}"
        return state + ": " + Path(f"{self.path}.stderr").read_text(errors="replace")[-3000:]


class Anchor:
    """``loop_anchor.py`` in a child process: the lateness a bare loop's timers see meanwhile."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.proc = subprocess.Popen(
            [sys.executable, str(ANCHOR), str(out)], stdout=subprocess.PIPE, text=True
        )
        await_ready(self.proc, "the anchor loop")

    def close(self) -> list[float]:
        stop(self.proc)
        return list(json.loads(self.out.read_text()))


def p99(samples: list[float]) -> float:
    late = sorted(samples)
    return late[int(len(late) * 0.99) - 1]


# -- the requests ---------------------------------------------------------------------------------

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=10,
)
names = st.sampled_from(
    ["handler", "at", "delay", "key", "payload", "on_conflict", "version", "all_dead", "x"]
)
likely = st.sampled_from(["h", "bg", "nope", "k0", "k1", "replace", "keep", "error", 0, 1, 30.0])
arguments = st.dictionaries(names, likely | values, max_size=6)
messages = st.fixed_dictionaries(
    {
        "v": st.sampled_from([1, 1, 1, 1, True, 1.0, 2, "1", None]),
        "command": st.sampled_from(
            ["ping", "status", "schedule", "cancel", "redrive", "compact", "__import__", ""]
        ),
        "args": arguments | values,
    }
)
keys = st.sampled_from(["k0", "k1", "k2", "k3", "new"]) | st.text(min_size=1, max_size=8)
plausible = st.one_of(  # requests an operator might send: most are carried out
    st.fixed_dictionaries(
        {"handler": st.sampled_from(["h", "h", "nope"]), "delay": st.floats(0, 120) | likely},
        optional={"key": keys, "payload": values, "on_conflict": likely},
    ).map(lambda a: {"v": 1, "command": "schedule", "args": a}),
    st.fixed_dictionaries({"key": keys}, optional={"version": st.integers(0, 10) | likely}).map(
        lambda a: {"v": 1, "command": "cancel", "args": a}
    ),
    st.fixed_dictionaries({"key": keys}).map(lambda a: {"v": 1, "command": "redrive", "args": a}),
)
well_formed = st.one_of(messages, plausible).map(
    lambda m: json.dumps(m, allow_nan=True).encode() + b"\n"
)
ADVERSARIAL = [
    b'{"v": 1, "command": "ping", "args": {"x": ' + b"[" * 3000 + b"]" * 3000 + b"}}\n",
    b"{" * 100_000 + b"\n",
    b"\xff\xfe\xfd\n",
    b"[]\n",
    b"null\n",
    b'{"v": 1}\n',
    b'{"v": 1, "command": "schedule", "args": {"handler": "h", "delay": 1e999}}\n',
    b'{"v": 1, "command": "schedule", "args": {"handler": "h", "delay": 1, "key": "k0",'
    b' "payload": [1e999]}}\n',
    b'{"v": 1, "command": "cancel", "args": {"key": "k1", "version": 1e400}}\n',
    b'{"v": true, "command": "cancel", "args": {"key": "k2"}}\n',
    b'{"v": 1, "command": "ping"}',  # no newline: the end of the stream ends it
    b'{"v": 1, "command": "status", "args": {"v": 1}}\n',
    b'{"v": 1, "command": "schedule", "args": {"handler": "h", "delay": 1, "payload": "'
    + b"x" * (1024 * 1024)
    + b'"}}\n',
]
raw_bytes = st.binary(min_size=1, max_size=64).filter(lambda b: bool(b.split(b"\n")[0].strip()))
requests = st.one_of(well_formed, st.sampled_from(ADVERSARIAL), raw_bytes)


def kill(proc: subprocess.Popen[str]) -> None:
    """A child the test did not stop (it failed first) is killed, never left behind."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()


@pytest.fixture
def live(tmp_path: Path) -> Iterator[LiveEngine]:
    engine = LiveEngine(tmp_path / "t.db")
    try:
        yield engine
    finally:
        kill(engine.proc)


@pytest.fixture
def anchor(tmp_path: Path) -> Iterator[Anchor]:
    loop = Anchor(tmp_path / "anchor.lateness")
    try:
        yield loop
    finally:
        kill(loop.proc)


@pytest.mark.slow
def test_hostile_clients_get_answers_change_nothing_and_timers_stay_on_time(
    live: LiveEngine, anchor: Anchor
) -> None:
    path = admin_path(live.path)
    exchange(path, b'{"v": 1, "command": "ping"}\n')  # warm: the server's first connection
    fds = live.open_fds()
    seen: dict[str, int] = {"ok": 0}

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(data=requests)
    def one_request(data: bytes) -> None:
        before = live.digest()
        try:
            answer = exchange(path, data)
        except OSError:
            raise AssertionError(f"no answer; engine {live.log()}") from None
        assert answer.endswith(b"\n") and answer.count(b"\n") == 1, (data[:200], answer[:200])
        message: Any = json.loads(answer)
        assert message["v"] == 1 and type(message["ok"]) is bool, message
        if message["ok"]:
            seen["ok"] += 1
        else:
            seen[message["error"]["code"]] = seen.get(message["error"]["code"], 0) + 1
            assert message["error"]["code"] != "internal", (data[:200], message)
            assert live.digest() == before, (data[:200], message)

    one_request()
    deadline = time.monotonic() + 5.0
    while live.open_fds() > fds and time.monotonic() < deadline:
        time.sleep(0.02)  # the server closes its side of the last connections
    assert live.open_fds() <= fds, "descriptors leaked"
    late, floor = live.close(), anchor.close()
    assert len(late) > 100 and len(floor) > 100, "too few background timers fired to judge"
    assert seen["ok"] and {"malformed", "invalid", "protocol_version"} <= set(seen), seen
    engine_p99, anchor_p99 = p99(late), p99(floor)
    if anchor_p99 > NOISY:
        pytest.skip(
            f"answers, digests and descriptors checked; lateness not judged: a bare loop's"
            f" timers were {anchor_p99 * 1000:.1f} ms late at p99 (the engine's"
            f" {engine_p99 * 1000:.1f} ms)"
        )
    assert engine_p99 < 0.05 + anchor_p99, (
        f"lateness p99 {engine_p99 * 1000:.1f} ms over {len(late)} timers, a bare loop's"
        f" {anchor_p99 * 1000:.1f} ms"
    )
    print(
        f"lateness p99 {engine_p99 * 1000:.2f} ms over {len(late)} timers (a bare loop's"
        f" {anchor_p99 * 1000:.2f} ms); refusals {seen}"
    )
