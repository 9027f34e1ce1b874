"""The documentation against the code: what a reader copies or believes must be true."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])


def paragraphs(pattern: str) -> list[tuple[str, str]]:
    """Every paragraph of the README and the docs matching ``pattern``, lines joined: (page,
    paragraph)."""
    return [
        (str(page.relative_to(ROOT)), " ".join(paragraph.split()))
        for page in PAGES
        for paragraph in re.split(r"\n\s*\n", page.read_text())
        if re.search(pattern, paragraph)
    ]


def test_the_docs_name_no_lock_sidecar() -> None:
    """The lock is ``flock`` on the journal itself (``journal/lock.py``): no ``<journal>-lock``
    file is made. The one mention allowed says that an old one is ignored."""
    found = paragraphs(r"-lock\b")
    assert [page for page, _ in found] == ["docs/guide/deployment.md"], found
    assert "from earlier versions is ignored" in found[0][1]


def test_the_contract_gives_the_engine_s_signature() -> None:
    """``docs/contract.md``'s ``Engine(...)`` line names every parameter, with its default, in
    order (it once left out ``compact_min_records`` and ``clock_check``), and its table says
    what each one means."""
    import ast
    import inspect

    from wheel_engine import Engine

    contract = (ROOT / "docs" / "contract.md").read_text()
    (written,) = re.findall(r"^`(Engine\(.*?\))`$", contract, re.MULTILINE | re.DOTALL)
    call = ast.parse(" ".join(written.split()).replace("*, ", ""), mode="eval").body
    assert isinstance(call, ast.Call)
    documented = [(kw.arg, ast.unparse(kw.value)) for kw in call.keywords]
    parameters = list(inspect.signature(Engine).parameters.values())
    assert [name for name, _ in documented] == [p.name for p in parameters]
    for (name, default), parameter in zip(documented, parameters, strict=True):
        if default in ("RetryPolicy()",):  # None in the code, meaning that
            continue
        assert ast.literal_eval(default) == parameter.default, name
        assert f"| `{name}`" in contract or f", `{name}`" in contract, name
