"""What refuses before the console serves: the bind address, writes without a token, a token
file others can read; and the view's catching up with a journal an engine keeps writing."""

from __future__ import annotations

from pathlib import Path

import pytest
from web_engine import MAILS, ORDERS, poll

from journal.state import TimerState
from wheel_engine.admin.client import request
from wheel_engine.admin.protocol import admin_path
from wheel_engine.cli import main
from wheel_engine.web.config import ConfigError, load_tokens
from wheel_engine.web.view import JournalView, _read_all


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.7", "::"])
def test_another_address_without_a_token_is_refused_in_one_line(
    seeded: Path, host: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["web", str(seeded), "--host", host, "--port", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"refusing to serve on {host}" in err
    assert "--token-file" in err


def test_writes_without_a_token_are_refused(
    seeded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["web", str(seeded), "--allow-writes", "--port", "1"]) == 2
    assert "--allow-writes without --token-file" in capsys.readouterr().err


def test_a_token_file_others_can_read_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    path.write_text("alice 0123456789abcdef0123\n")
    path.chmod(0o644)
    with pytest.raises(ConfigError, match="readable by others"):
        load_tokens(str(path))
    path.chmod(0o600)
    assert load_tokens(str(path)) == {"0123456789abcdef0123": "alice"}
    path.write_text("short\n")
    with pytest.raises(ConfigError, match="at least 16"):
        load_tokens(str(path))


def test_a_missing_journal_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["web", str(tmp_path / "nope.db"), "--port", "1"]) == 3
    assert "no such file" in capsys.readouterr().err


def test_the_view_follows_the_tail_and_a_compaction(seeded: Path) -> None:
    view = JournalView(str(seeded))
    try:
        first = view.read()
        seq = first.last_seq
        assert len(first.timers) == ORDERS + 1 + MAILS
        sock, owner = admin_path(seeded), seeded.stat().st_uid
        request(sock, "cancel", owner=owner, key="order-9")
        request(sock, "schedule", owner=owner, handler="orders.expire", key="late-1", delay=900)
        state = view.read()
        assert state.last_seq == seq + 2 and state.timers["order-9"].state == "CANCELED"
        assert (("orders.expire", "CANCELED"), 1) in state.counts.items()
        assert ("late-1" in state.keys) and any(k == "late-1" for _d, _v, k in state.pending)
        request(sock, "compact", owner=owner)  # records folded: the view re-reads in the back
        request(sock, "cancel", owner=owner, key="order-10")
        assert poll(lambda: view.read().snapshot_seq > 0)
        state = view.read()
        assert state.timers["order-10"].state == "CANCELED"
        fresh = _read_all(str(seeded))  # what a full read says: the folded view must agree
        assert {k: (r.state, r.version, r.due) for k, r in state.timers.items()} == {
            k: (r.state, r.version, r.due) for k, r in fresh.timers.items()
        }
        assert +state.counts == +fresh.counts and list(state.pending) == list(fresh.pending)
        assert {s: list(keys) for s, keys in state.by_state.items()} == {
            s: list(keys) for s, keys in fresh.by_state.items()
        }
        assert list(state.by_state[TimerState.DEAD]) == [f"mail-{n}" for n in range(1, MAILS + 1)]
        pending = sum(n for (_h, s), n in state.counts.items() if s == "PENDING")
        assert pending == ORDERS + 1 + 1 - 2 == len(state.pending)  # + hostile, late-1; - 2
    finally:
        view.close()


def test_wheel_engine_web_serves_on_loopback_only_by_default(seeded: Path) -> None:
    import socket
    import subprocess
    import sys

    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "wheel_engine.cli", "web", str(seeded), "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"

        def up() -> bool:
            try:
                return httpx.get(url + "/api/overview", timeout=1.0).status_code == 200
            except httpx.HTTPError:
                return False

        assert poll(up, timeout=20.0), "the console did not answer"
        listening = subprocess.run(
            ["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True, check=False
        ).stdout
        if listening:  # iproute2 is there: the only socket is on the loopback address
            assert all("127.0.0.1:" in line for line in listening.splitlines()), listening
        rebound = httpx.get(url + "/", headers={"Host": f"rebound.example:{port}"}, timeout=5)
        assert rebound.status_code == 421
        assert httpx.get(url + "/", headers={"Host": f"localhost:{port}"}).status_code == 200
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        for stream in (proc.stdout, proc.stderr):
            assert stream is not None
            stream.close()


def test_a_stale_record_of_a_dropped_key_is_folded_as_the_journal_folds_it() -> None:
    from journal import Ack, Cancel, Schedule
    from wheel_engine.web.view import ViewState

    state = ViewState({}, snapshot_seq=0, last_seq=0, sealed=True)
    state.fold(1, Cancel("gone", 3, 10.0))  # its timer was dropped by a compaction
    state.fold(2, Ack("gone", 3, 11.0))
    assert state.timers == {} and state.last_seq == 2 and not +state.counts
    state.fold(3, Schedule("k", 4, "h", 50.0, None, 12.0))
    state.fold(4, Schedule("k", 2, "h", 60.0, None, 13.0))  # stale: a lower version
    assert list(state.pending) == [(50.0, 4, "k")] and +state.counts == {("h", "PENDING"): 1}
