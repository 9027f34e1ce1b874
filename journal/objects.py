"""The journal's schema, object by object, against the schema the engine creates.

SQLite keeps every schema object in ``sqlite_master``: tables, their indexes (SQLite's own
``sqlite_autoindex_*`` included), triggers and views, each with the SQL that made it. A file
that holds our three tables may still carry objects we never made, and SQLite runs them on our
behalf: a trigger on ``records`` runs with every commit; a CHECK constraint, a default, a
generated column or an index on an expression calls functions on every insert. So a journal must
hold exactly the objects :data:`journal.schema._DDL` creates, each with the same SQL (compared
with runs of whitespace folded, so a schema-1 journal written with other spacing still passes),
and nothing else: :func:`unexpected` lists each difference, naming the object, and the journal
refuses the file before anything is written (:func:`journal.schema.read_meta`).

Reading ``sqlite_master`` runs nothing: SQLite parses the stored SQL but executes a trigger, a
view or a constraint only when the table it guards is written or the view is read.
"""

from __future__ import annotations

import functools
import re
import sqlite3
from typing import Final

__all__ = ["SchemaObjects", "expected_objects", "schema_objects", "unexpected"]

#: ``(type, name) -> (tbl_name, sql)``: one row of ``sqlite_master`` each.
SchemaObjects = dict[tuple[str, str], tuple[str, str | None]]

_SPACE: Final = re.compile(r"\s+")


def _folded(sql: str | None) -> str | None:
    return None if sql is None else _SPACE.sub(" ", sql).strip()


def schema_objects(con: sqlite3.Connection) -> SchemaObjects:
    """Every object in the schema of ``con``'s main database."""
    rows = con.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall()
    return {(str(t), str(n)): (str(tbl), _folded(sql)) for t, n, tbl, sql in rows}


@functools.cache
def expected_objects(ddl: tuple[str, ...]) -> SchemaObjects:
    """The objects ``ddl`` creates, as SQLite stores them (built once, in memory)."""
    con = sqlite3.connect(":memory:")
    try:
        for statement in ddl:
            con.execute(statement)
        return schema_objects(con)
    finally:
        con.close()


def unexpected(actual: SchemaObjects, expected: SchemaObjects) -> list[str]:
    """Each object of ``actual`` that ``expected`` lacks or has otherwise, in a stable order."""
    problems = []
    for (kind, name), (table, sql) in sorted(actual.items()):
        want = expected.get((kind, name))
        if want is None:
            on = f" on {table}" if kind in ("index", "trigger") else ""
            problems.append(f"{kind} {name!r}{on} is not one the engine creates")
        elif want != (table, sql):
            problems.append(f"{kind} {name!r} is not as the engine creates it (its SQL differs)")
    problems.extend(
        f"{kind} {name!r} is missing" for kind, name in sorted(set(expected) - set(actual))
    )
    return problems
