"""The throwaway cluster itself: it starts, answers, and runs as this machine allows.

Without PostgreSQL or psycopg this is the one test collected here, and it skips with one line.
"""

from __future__ import annotations

from pg_cluster import Cluster


def test_the_cluster_answers_on_loopback(pg_server: Cluster) -> None:
    import psycopg

    with psycopg.connect(pg_server.admin_url) as conn:
        row = conn.execute("SELECT current_setting('fsync'), inet_server_addr()::text").fetchone()
    assert row == ("off", "127.0.0.1/32")
