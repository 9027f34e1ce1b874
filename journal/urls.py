"""Which journal a target names: a ``postgresql://`` or ``postgres://`` URL selects the
PostgreSQL journal (:mod:`journal.postgres`), anything else is a SQLite file.

A stdlib-only leaf, outside ``journal.postgres`` (whose package imports psycopg): the engine's
options, the CLI and the web console ask it before they know whether psycopg is needed.
"""

from __future__ import annotations

from typing import Final

__all__ = ["POSTGRES_SCHEMES", "is_postgres_url"]

#: The schemes libpq takes as a connection URI.
POSTGRES_SCHEMES: Final = ("postgresql://", "postgres://")


def is_postgres_url(target: object) -> bool:
    """True for a str starting with one of :data:`POSTGRES_SCHEMES`: what selects the
    PostgreSQL journal."""
    return isinstance(target, str) and target.startswith(POSTGRES_SCHEMES)
