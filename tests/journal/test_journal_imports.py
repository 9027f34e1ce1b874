"""The journal package's import graph has no cycle, imports under ``TYPE_CHECKING`` counted:
a module per concept, each readable after the ones it imports."""

from __future__ import annotations

import ast
from pathlib import Path

import journal

ROOT = Path(journal.__file__).parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, modules: set[str]) -> set[str]:
    """The package's modules ``path`` imports anywhere in its text (``TYPE_CHECKING`` too);
    ``from pkg import sub`` counts as an import of ``pkg.sub`` when that is a module, and of
    ``pkg`` otherwise."""
    here = _module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            named = {f"{base}.{alias.name}" for alias in node.names}
            found.update(named & modules)
            if named - modules:  # a name defined in ``base`` itself
                found.add(base)
    return {name for name in found if name in modules and name != here}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(name: str) -> None:
        index[name] = low[name] = len(index)
        stack.append(name)
        for other in graph[name]:
            if other not in index:
                visit(other)
                low[name] = min(low[name], low[other])
            elif other in stack:
                low[name] = min(low[name], index[other])
        if low[name] == index[name]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == name:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return found


def test_the_journal_package_has_no_import_cycle() -> None:
    paths = {_module_name(p): p for p in ROOT.rglob("*.py")}
    graph = {name: _imports(path, set(paths)) for name, path in paths.items()}
    assert graph["journal.migration"], "the graph must see the migration's imports"
    assert _cycles(graph) == []


def test_a_cycle_is_seen() -> None:
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
