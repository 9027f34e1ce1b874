"""Engines on PostgreSQL; their cluster and databases come from ``tests/pg_cluster.py``."""

from __future__ import annotations

from pathlib import Path

from pg_cluster import REQUIRED, psycopg

if psycopg is None and not REQUIRED:
    # Nothing here runs without psycopg; the PostgreSQL journal's tests say so in one line.
    collect_ignore = [path.name for path in Path(__file__).parent.glob("test_*.py")]
