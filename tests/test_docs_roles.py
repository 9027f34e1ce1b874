"""The API reference shows links where the docstrings write Sphinx roles (docs/griffe_roles.py,
the griffe extension that ``mkdocs.yml`` registers), never the raw roles."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: A role as mkdocstrings would show it, raw, in a page: ``:meth:<code>close</code>``.
RAW_ROLE = re.compile(r":(?:mod|meth|class|func|data|attr|exc|obj):(?:<code>|`)")


def roles() -> ModuleType:
    spec = importlib.util.spec_from_file_location("griffe_roles", ROOT / "docs" / "griffe_roles.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_role_becomes_an_optional_cross_reference() -> None:
    pytest.importorskip("griffe")
    replace = roles().replace_roles
    full = {"close": "pkg.mod.Thing.close", "Journal.open": "journal.journal.Journal.open"}
    text = (
        "Create with :meth:`Journal.open`; close with :meth:`close`; see :mod:`.events`,"
        " :class:`~journal.errors.JournalCorrupt`, :py:func:`the loader <pkg.load>` and"
        " :data:`UNKNOWN`. Not a role: ``:meth:`` in code, a:b, 3:00."
    )
    out = replace(text, lambda target: full.get(target))

    def ref(identifier: str, shown: str) -> str:
        return f'<autoref identifier="{identifier}" optional><code>{shown}</code></autoref>'

    assert out == (
        f"Create with {ref('journal.journal.Journal.open', 'Journal.open')}; close with"
        f" {ref('pkg.mod.Thing.close', 'close')}; see {ref('events', 'events')},"
        f" {ref('journal.errors.JournalCorrupt', 'JournalCorrupt')},"
        f" {ref('pkg.load', 'the loader')} and {ref('UNKNOWN', 'UNKNOWN')}."
        " Not a role: ``:meth:`` in code, a:b, 3:00."
    )


def test_names_resolve_from_the_docstring_s_scope() -> None:
    griffe = pytest.importorskip("griffe")
    extension = roles().SphinxRoles()
    journal = griffe.load("journal", search_paths=[ROOT], extensions=griffe.Extensions(extension))
    wheel_engine = griffe.load(
        "wheel_engine", search_paths=[ROOT], extensions=griffe.Extensions(extension)
    )
    opened = journal["journal.Journal"].docstring.value
    assert 'identifier="journal.journal.Journal.open"' in opened  # Journal.open, from journal
    assert 'identifier="journal.journal.Journal.close"' in opened  # close: the class's own
    metrics = wheel_engine["metrics"].docstring.value
    assert 'identifier="wheel_engine.events"' in metrics  # .events, relative to the package
    for package in (journal, wheel_engine):
        left = [
            obj.path
            for obj in roles()._objects(package)
            if obj.docstring is not None and roles().ROLE.search(obj.docstring.value)
        ]
        assert left == []


def test_the_built_reference_links_instead_of_showing_roles(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings")
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-d", str(site)],
        cwd=ROOT,
        check=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    page = (site / "reference" / "index.html").read_text()
    assert RAW_ROLE.findall(page) == []
    # Journal's docstring: "Create with :meth:`Journal.open`; close with :meth:`close`."
    assert re.search(r'href="#journal\.Journal\.open"><code>Journal\.open</code></a>', page)
    assert re.search(r'href="#journal\.Journal\.close"><code>close</code></a>', page)
    built_code = [*site.rglob("*.py"), *site.rglob("*.pyc")]
    assert built_code == [], "the extension is build code, not a page"
