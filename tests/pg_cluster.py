"""A throwaway PostgreSQL cluster for the PostgreSQL tests (tests/postgres, tests/nodes), and a
fresh database each. ``tests/conftest.py`` loads this module as a plugin (``pytest_plugins``),
so one cluster serves a session.

The session fixture :func:`pg_server` runs ``initdb`` and ``pg_ctl`` (Debian's ``postgresql``
package) in a temporary folder on a free loopback port, with fsync off (a test cluster need not
survive a power loss), as the ``postgres`` user when running as root (PostgreSQL refuses to run
as root), and stops it at the end. Without the binaries or psycopg the tests skip with one line;
``WHEEL_ENGINE_REQUIRE_POSTGRES=1`` (set by CI) makes that a failure instead.
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REQUIRED = os.environ.get("WHEEL_ENGINE_REQUIRE_POSTGRES") == "1"

try:
    import psycopg
except ImportError:  # the tests need the ``postgres`` extra
    psycopg = None  # type: ignore[assignment]

#: Seconds pg_ctl waits for the server to start or stop.
_PG_CTL_TIMEOUT = 60
_databases = itertools.count(1)


def unavailable(reason: str) -> None:
    """Skip (or, when PostgreSQL is required, fail) with one line."""
    if REQUIRED:
        pytest.fail(f"PostgreSQL is required (WHEEL_ENGINE_REQUIRE_POSTGRES=1): {reason}")
    pytest.skip(f"PostgreSQL tests skipped: {reason}")


def _binary(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _as_postgres(argv: list[str]) -> list[str]:
    """PostgreSQL will not run as root: run ``argv`` as the ``postgres`` user then."""
    if os.geteuid() != 0:
        return argv
    return ["runuser", "-u", "postgres", "--", *argv]


class Cluster:
    """A running throwaway cluster: ``admin_url`` reaches its ``postgres`` database."""

    def __init__(self, root: Path, pg_ctl: str, port: int) -> None:
        self.root = root
        self.pg_ctl = pg_ctl
        self.port = port
        self.data = root / "data"

    def url(self, dbname: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    @property
    def admin_url(self) -> str:
        return self.url("postgres")

    def stop(self) -> None:
        subprocess.run(
            _as_postgres([self.pg_ctl, "-D", str(self.data), "-m", "immediate", "stop"]),
            capture_output=True,
            timeout=_PG_CTL_TIMEOUT,
            check=False,
        )


def _start_cluster() -> Cluster:
    if psycopg is None:
        unavailable("psycopg is not installed (pip install 'wheel-engine[postgres]')")
    initdb, pg_ctl = _binary("initdb"), _binary("pg_ctl")
    if initdb is None or pg_ctl is None:
        unavailable("initdb/pg_ctl not found (apt-get install postgresql)")
    assert initdb is not None and pg_ctl is not None
    root = Path(tempfile.mkdtemp(prefix="wheel-pg-"))
    if os.geteuid() == 0:
        try:
            user = pwd.getpwnam("postgres")
        except KeyError:
            unavailable("running as root and there is no 'postgres' user")
        os.chown(root, user.pw_uid, user.pw_gid)
    cluster = Cluster(root, pg_ctl, _free_port())
    options = (
        f"-p {cluster.port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off"
        " -c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
    )
    wait = ["-w", "-t", str(_PG_CTL_TIMEOUT), "start"]
    steps = [
        [initdb, "-D", str(cluster.data), "-A", "trust", "-U", "postgres", "-N", "-E", "UTF8"],
        [pg_ctl, "-D", str(cluster.data), "-l", str(root / "log"), "-o", options, *wait],
    ]
    for argv in steps:
        done = subprocess.run(
            _as_postgres(argv), capture_output=True, text=True, timeout=_PG_CTL_TIMEOUT + 30
        )
        if done.returncode != 0:
            cluster.stop()
            shutil.rmtree(root, ignore_errors=True)
            unavailable(f"{Path(argv[0]).name} failed: {(done.stderr or done.stdout).strip()}")
    return cluster


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Cluster]:
    """The session's cluster (started on first use, stopped at the end)."""
    cluster = _start_cluster()
    try:
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(cluster.root, ignore_errors=True)


@pytest.fixture
def pg_url(pg_server: Cluster) -> Iterator[str]:
    """A URL to a new, empty database of its own, dropped after the test."""
    name = f"wheel_test_{os.getpid()}_{next(_databases)}"
    with psycopg.connect(pg_server.admin_url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    try:
        yield pg_server.url(name)
    finally:
        with psycopg.connect(pg_server.admin_url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def sql(url: str, statement: str, params: Any = None) -> list[tuple[Any, ...]]:
    """Run one statement on a connection of its own; its rows (if it returns any)."""
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(statement, params)
        return cur.fetchall() if cur.description is not None else []


def db_now(url: str) -> float:
    return float(sql(url, "SELECT extract(epoch FROM now())::float8")[0][0])
