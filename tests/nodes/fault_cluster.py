"""A PostgreSQL cluster of its own for the fault tests: they stop and start it under load, which
the session's shared cluster (``tests/pg_cluster.py``) must never see.

:func:`outage` stops the server (``pg_ctl stop -m fast`` or ``-m immediate``), keeps it down
for a while, and starts it again on the same port with the same options, as an operator's
restart would. The cluster also has a role with a hostile password and password
authentication (scram-sha-256) for it, while every other role is trusted as usual.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
from pg_cluster import Cluster, _as_postgres, _binary, _free_port, unavailable

#: A password holding a space, ``%``, ``@``, ``:``, ``/`` and non-ASCII: libpq quotes such
#: things back in its messages when they are put raw in a URL.
ODD_PASSWORD = "s3 cr%t@p:a/ss-wörd"
ODD_ROLE = "odd"
_TIMEOUT = 60


class FaultCluster(Cluster):
    """A running cluster of its own; :meth:`url` reaches a database as the trusted superuser."""

    def __init__(self, root: Path, pg_ctl: str, port: int) -> None:
        super().__init__(root, pg_ctl, port)
        # synchronous_commit stays on: a commit acknowledged must survive ``-m immediate``
        # (its WAL reaches the OS before the answer; fsync=off only risks an OS crash).
        self.options = (
            f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off"
            " -c full_page_writes=off -c max_connections=200"
        )

    def _ctl(self, *args: str) -> None:
        argv = _as_postgres([self.pg_ctl, "-D", str(self.data), *args])
        done = subprocess.run(argv, capture_output=True, text=True, timeout=_TIMEOUT + 30)
        assert done.returncode == 0, (args, done.stderr or done.stdout)

    def start(self) -> None:
        log = str(self.root / "log")
        self._ctl("-l", log, "-o", self.options, "-w", "-t", str(_TIMEOUT), "start")

    def stop(self, mode: str = "fast") -> None:  # type: ignore[override]
        self._ctl("-m", mode, "-w", "-t", str(_TIMEOUT), "stop")

    def outage(self, seconds: float, mode: str = "fast") -> float:
        """Stop the server, wait ``seconds``, start it again; returns how long it was down."""
        began = time.monotonic()
        self.stop(mode)
        time.sleep(max(0.0, seconds - (time.monotonic() - began)))
        self.start()
        return time.monotonic() - began


def start_fault_cluster() -> FaultCluster:
    initdb, pg_ctl = _binary("initdb"), _binary("pg_ctl")
    if initdb is None or pg_ctl is None:
        unavailable("initdb/pg_ctl not found (apt-get install postgresql)")
    assert initdb is not None and pg_ctl is not None
    root = Path(tempfile.mkdtemp(prefix="wheel-pg-faults-"))
    if os.geteuid() == 0:
        user = pwd.getpwnam("postgres")
        os.chown(root, user.pw_uid, user.pw_gid)
    cluster = FaultCluster(root, pg_ctl, _free_port())
    argv = [initdb, "-D", str(cluster.data), "-A", "trust", "-U", "postgres", "-N", "-E", "UTF8"]
    done = subprocess.run(_as_postgres(argv), capture_output=True, text=True, timeout=_TIMEOUT)
    if done.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        unavailable(f"initdb failed: {(done.stderr or done.stdout).strip()}")
    hba = cluster.data / "pg_hba.conf"
    rules = hba.read_text()
    # Password authentication for the odd role over TCP, before the trust lines match it.
    hba.write_text(f"host all {ODD_ROLE} 127.0.0.1/32 scram-sha-256\n{rules}")
    cluster.start()
    with psycopg.connect(cluster.admin_url, autocommit=True) as admin:
        admin.execute(
            psycopg.sql.SQL("CREATE ROLE {} LOGIN SUPERUSER PASSWORD {}").format(
                psycopg.sql.Identifier(ODD_ROLE), psycopg.sql.Literal(ODD_PASSWORD)
            )
        )
    return cluster


@contextlib.contextmanager
def fault_cluster() -> Iterator[FaultCluster]:
    cluster = start_fault_cluster()
    try:
        yield cluster
    finally:
        with contextlib.suppress(AssertionError, subprocess.SubprocessError):
            cluster.stop("immediate")
        shutil.rmtree(cluster.root, ignore_errors=True)


def fresh_database(cluster: FaultCluster, name: str) -> str:
    with psycopg.connect(cluster.admin_url, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.execute(f"CREATE DATABASE {name}")
    return cluster.url(name)
