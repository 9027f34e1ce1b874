"""A second local user for attacks that need one (tests only): created and removed per test.

The attacker's steps run in a forked child that drops to that user (``setgroups``, ``setgid``,
``setuid``), so they have exactly the rights another account on the machine would have. Tests
that need it are skipped, with the reason, where it cannot be made (not root, no ``useradd``).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

import pytest


class User(NamedTuple):
    name: str
    uid: int
    gid: int

    def run(self, step: Callable[[], None]) -> None:
        """Run ``step`` as this user in a forked child; fail the test if it raised."""
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            code = 0
            try:
                os.setgroups([])
                os.setgid(self.gid)
                os.setuid(self.uid)
                step()
            except BaseException:
                traceback.print_exc()
                code = 1
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, f"the step as {self.name} failed"


@contextlib.contextmanager
def second_user() -> Iterator[User]:
    """A fresh local account, removed afterwards (with whatever it owned in /tmp left to us)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to create a second local user (useradd)")
    if shutil.which("useradd") is None or shutil.which("userdel") is None:
        pytest.skip("useradd/userdel are not installed: cannot create a second local user")
    name = f"wehost{os.getpid() % 1_000_000}"
    made = subprocess.run(
        ["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
        capture_output=True,
        text=True,
    )
    if made.returncode != 0:
        pytest.skip(f"cannot create a second local user: {made.stderr.strip()}")
    try:
        entry = pwd.getpwnam(name)
        yield User(name, entry.pw_uid, entry.pw_gid)
    finally:
        subprocess.run(["userdel", name], capture_output=True, check=False)


@contextlib.contextmanager
def sticky_folder() -> Iterator[Path]:
    """A world-writable sticky folder (mode 1777, like /tmp) every user can reach."""
    path = Path(tempfile.mkdtemp(prefix="we-shared-", dir="/tmp"))
    try:
        os.chmod(path, 0o1777)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
