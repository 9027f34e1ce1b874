"""No password in any error, chained error, log line or ``stats()`` (issue 21, item 5), and the
connect timeout as an option.

The module's own cluster (``fault_cluster.py``) has a role whose password holds a space, ``%``,
``@``, ``:``, ``/`` and non-ASCII, checked by scram-sha-256 over TCP. The engine connects with
it written raw into the URL, percent-encoded, and as ``?password=``; then the same URLs fail (no
server on the port, a wrong password) and nothing the failure leaves behind shows the password.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
import traceback
from collections.abc import Iterator
from urllib.parse import quote

import pytest
from fault_cluster import ODD_PASSWORD, ODD_ROLE, FaultCluster, fault_cluster, fresh_database
from pg_cluster import _free_port

from journal.errors import JournalError
from journal.postgres import PostgresClient, StoreUnavailable
from wheel_engine import Engine, Firing

pytestmark = pytest.mark.slow

#: Pieces of the password that must not show either (each alone is unusual enough).
PIECES = ("s3 cr", "cr%t", "p:a", "a/ss", "wörd", quote(ODD_PASSWORD, safe=""))


@pytest.fixture(scope="module")
def cluster() -> Iterator[FaultCluster]:
    with fault_cluster() as own:
        yield own


def urls(port: int, db: str, password: str = ODD_PASSWORD) -> dict[str, str]:
    encoded = quote(password, safe="")
    where = f"127.0.0.1:{port}/{db}"
    return {
        "raw": f"postgresql://{ODD_ROLE}:{password}@{where}",
        "encoded": f"postgresql://{ODD_ROLE}:{encoded}@{where}",
        "query": f"postgresql://{ODD_ROLE}@{where}?password={encoded}",
    }


def texts_of(exc: BaseException) -> str:
    """Everything an error shows: its text, repr and traceback, and those of its chain."""
    shown = ["".join(traceback.format_exception(exc))]
    link: BaseException | None = exc
    while link is not None:
        shown += [str(link), repr(link), repr(link.args)]
        link = link.__cause__ or link.__context__
    return "\n".join(shown)


def assert_hidden(text: str) -> None:
    for piece in (ODD_PASSWORD, *PIECES):
        assert piece not in text, f"{piece!r} shows in: {text}"


@pytest.mark.parametrize("form", ["raw", "encoded", "query"])
async def test_an_odd_password_connects_and_never_shows(
    cluster: FaultCluster, form: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    fresh_database(cluster, f"pw_{form}")
    url = urls(cluster.port, f"pw_{form}")[form]
    fired = asyncio.Event()

    async def handler(firing: Firing) -> None:
        fired.set()

    engine = Engine(url, node="n", lease=2.0)
    engine.register("h", handler)
    async with engine:
        await engine.schedule("h", key="k", delay=0)
        await asyncio.wait_for(fired.wait(), 10)
        assert_hidden(repr(engine.stats()))
    with PostgresClient.connect(url) as client:  # the CLI's path
        assert client.lookup("k") is not None
        assert_hidden(repr(vars(client)) + client.where)
    assert_hidden("\n".join(r.getMessage() for r in caplog.records))


@pytest.mark.parametrize("form", ["raw", "encoded", "query"])
@pytest.mark.parametrize("fault", ["no server", "wrong password"])
async def test_a_failed_connect_shows_no_password(
    cluster: FaultCluster, form: str, fault: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    if fault == "no server":
        url = urls(_free_port(), "postgres")[form]
    else:
        url = urls(cluster.port, "postgres", ODD_PASSWORD + "x")[form]
    engine = Engine(url, node="n")  # refused at once: no timeout needed
    with pytest.raises(StoreUnavailable) as caught:
        await engine.start()
    assert_hidden(texts_of(caught.value))
    assert caught.value.__cause__ is None
    with pytest.raises(JournalError) as cli:
        PostgresClient.connect(url)
    assert_hidden(texts_of(cli.value))
    assert_hidden("\n".join(r.getMessage() for r in caplog.records))
    assert_hidden(repr(engine.stats()))
    if fault == "wrong password":
        assert "password authentication failed" in str(caught.value)


async def test_the_connect_timeout_is_an_option() -> None:
    """A server that accepts the connection and never answers: start() gives up after the
    option's seconds, not the default ten."""
    with socket.create_server(("127.0.0.1", 0), backlog=8) as silent:
        port = silent.getsockname()[1]
        engine = Engine(
            f"postgresql://u:{quote(ODD_PASSWORD)}@127.0.0.1:{port}/db", node="n", connect_timeout=1
        )
        began = time.monotonic()
        with pytest.raises(StoreUnavailable) as caught:
            await engine.start()
        took = time.monotonic() - began
    assert took < 5, took
    assert_hidden(texts_of(caught.value))


@pytest.mark.parametrize("bad", [0, -1, float("inf"), "10", True])
def test_a_bad_connect_timeout_is_refused_before_anything_opens(bad: object) -> None:
    with pytest.raises((ValueError, TypeError), match="connect_timeout"):
        Engine("postgresql://u@127.0.0.1:1/db", connect_timeout=bad)  # type: ignore[arg-type]


def test_a_connect_timeout_needs_a_postgresql_url(tmp_path: object) -> None:
    with pytest.raises(ValueError, match="connect_timeout"):
        Engine(None, connect_timeout=5)
