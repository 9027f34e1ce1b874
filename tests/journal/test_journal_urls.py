"""One ``is_postgres_url`` (``journal.urls``) decides for the engine, the store, the CLI and the
web console which journal a target names, without importing psycopg."""

from __future__ import annotations

import subprocess
import sys

import pytest

from journal.urls import POSTGRES_SCHEMES, is_postgres_url


@pytest.mark.parametrize(
    "target",
    ["postgresql://u@h/db", "postgres://h/db", "postgresql://", "postgres:///db?host=/run"],
)
def test_a_libpq_uri_is_a_postgres_url(target: str) -> None:
    assert is_postgres_url(target)


@pytest.mark.parametrize(
    "target",
    [
        "timers.db",
        "/tmp/postgresql://x",
        "POSTGRESQL://h/db",
        "postgresql:/h",
        "",
        None,
        5,
        b"postgres://h",
    ],
)
def test_anything_else_is_not(target: object) -> None:
    assert not is_postgres_url(target)


def test_every_caller_uses_the_one_definition() -> None:
    pytest.importorskip("psycopg")
    import journal.postgres
    import journal.postgres.store
    import wheel_engine.nodes.options

    assert journal.postgres.is_postgres_url is is_postgres_url
    assert journal.postgres.store.is_postgres_url is is_postgres_url
    assert wheel_engine.nodes.options.is_postgres_url is is_postgres_url
    assert POSTGRES_SCHEMES == ("postgresql://", "postgres://")


def test_deciding_imports_no_driver() -> None:
    code = (
        "import sys, journal.urls, wheel_engine.nodes.options, wheel_engine.cli.pg;"
        " assert 'psycopg' not in sys.modules, sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
