"""The PostgreSQL journal's tests; their cluster and databases come from ``tests/pg_cluster.py``."""

from __future__ import annotations

from pathlib import Path

from pg_cluster import REQUIRED, psycopg

if psycopg is None and not REQUIRED:
    # Only test_postgres_cluster.py is collected (it imports no psycopg): one skip line.
    collect_ignore = [
        path.name
        for path in Path(__file__).parent.glob("test_postgres_*.py")
        if path.name != "test_postgres_cluster.py"
    ]
