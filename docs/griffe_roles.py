"""A griffe extension for the API reference: the Sphinx roles of our docstrings become links.

The docstrings cross-reference with Sphinx roles (``:meth:`close```, ``:class:`~journal.Journal```,
``:mod:`.events```), which read well in an editor and in ``help()``; mkdocstrings renders
docstrings as Markdown, where such a role is literal text. So, once a package is loaded and
before any docstring is parsed, every role is replaced by an optional autorefs cross-reference
to the object it names, resolved as Python would from the docstring's own scope:

- ``.name`` is relative to the docstring's package (``:mod:`.events``` in
  ``wheel_engine.metrics`` is ``wheel_engine.events``);
- a dotted name starting with a loaded package is absolute;
- anything else is looked up from the object outwards (its members, its class, its module's
  names and imports): ``:meth:`close``` in ``Engine``'s docstrings is ``Engine.close``.

The link shows the name as written (``~`` shows its last part, as Sphinx does). "Optional"
means a target the reference does not render (a private module, say) stays plain code instead
of failing the strict build. Registered in ``mkdocs.yml`` (``extensions:`` of the Python
handler); ``tests/test_docs_roles.py`` checks it.
"""

from __future__ import annotations

import html
import re
from typing import Any

import griffe

__all__ = ["SphinxRoles", "replace_roles"]

#: ``:role:`target``` or ``:role:`title <target>```, with an optional ``py:`` domain.
ROLE = re.compile(
    r":(?:py:)?(?:mod|module|meth|class|func|data|attr|exc|obj|const|type):"
    r"`(?P<body>[^`\n]+)`"
)


def replace_roles(text: str, resolve: Any) -> str:
    """``text`` with each Sphinx role replaced by an optional cross-reference to
    ``resolve(target)`` (a full dotted path, or None when the name cannot be resolved)."""

    def link(match: re.Match[str]) -> str:
        body = match["body"].strip()
        title, _, explicit = body.partition(" <")
        if explicit.endswith(">"):
            target, shown = explicit[:-1].strip(), title.strip()
        else:
            target = body.lstrip("~")
            shown = target.rpartition(".")[2] if body.startswith("~") else target
            shown = shown.lstrip(".")
        identifier = resolve(target) or target.lstrip(".")
        return (
            f'<autoref identifier="{html.escape(identifier)}" optional>'
            f"<code>{html.escape(shown)}</code></autoref>"
        )

    return ROLE.sub(link, text)


def resolver(obj: griffe.Object, packages: set[str]) -> Any:
    """The name resolution of :func:`replace_roles` from ``obj``'s scope."""

    def resolve(target: str) -> str | None:
        if target.startswith("."):
            module = obj.module
            package = module.path if module.is_package else module.parent.path  # type: ignore[union-attr]
            return package + target
        head, dot, rest = target.partition(".")
        if head in packages:
            return target
        try:
            return obj.resolve(head) + dot + rest
        except (griffe.NameResolutionError, AttributeError):
            return None

    return resolve


class SphinxRoles(griffe.Extension):
    """Rewrites the roles in every docstring of each package once it is loaded."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        packages = set(loader.modules_collection.members)
        for obj in _objects(pkg):
            docstring = obj.docstring
            if docstring is not None and ":" in docstring.value and ROLE.search(docstring.value):
                docstring.value = replace_roles(docstring.value, resolver(obj, packages))


def _objects(obj: griffe.Object) -> list[griffe.Object]:
    """``obj`` and every object under it, aliases left out (their targets are visited where
    they are defined)."""
    found = [obj]
    for member in obj.members.values():
        if not member.is_alias:
            found.extend(_objects(member))  # type: ignore[arg-type]
    return found
