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
