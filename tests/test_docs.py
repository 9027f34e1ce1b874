"""The documentation against the code: what a reader copies or believes must be true."""

from __future__ import annotations

import ast
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

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


def code_blocks(page: str) -> list[str]:
    """The ``python`` code blocks of a page, in order."""
    text = (ROOT / page).read_text()
    return re.findall(r"^```python\n(.*?)^```", text, re.MULTILINE | re.DOTALL)


def test_the_quickstarts_keep_a_recovered_timer_and_define_what_they_use() -> None:
    """Run again after a kill, a quickstart with the default ``on_conflict="replace"`` replaced
    the recovered timer; ``docs/index.md``'s handler used an undefined ``db``."""
    for page in ("README.md", "docs/index.md"):
        quickstart = code_blocks(page)[0]
        assert 'on_conflict="keep"' in quickstart, page
        compile(quickstart, page, "exec")
        names = {n.id for n in ast.walk(ast.parse(quickstart)) if isinstance(n, ast.Name)}
        assert "db" not in names, page


@pytest.mark.slow
def test_the_readme_quickstart_killed_and_run_again_fires_the_recovered_timer(
    tmp_path: Path,
) -> None:
    """The README's crash advice, followed: kill -9 once the timers are committed, run it again:
    the recovered A1 fires, as version 1 (the README says ``order:A1#1``)."""
    script = tmp_path / "quickstart.py"
    script.write_text(code_blocks("README.md")[0])
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    first = subprocess.Popen([sys.executable, str(script)], cwd=tmp_path, env=env)
    try:
        deadline = time.monotonic() + 30
        while not committed(tmp_path / "timers.db", "order:B2") and first.poll() is None:
            assert time.monotonic() < deadline, "the quickstart never scheduled its timers"
            time.sleep(0.02)
    finally:
        first.kill()
        first.wait()
    assert first.returncode == -signal.SIGKILL  # killed before A1 fired (2 s after scheduling)
    again = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines() == ["cancelling A1 key order:A1#1"]


def committed(journal: Path, key: str) -> bool:
    """Whether ``key``'s schedule is committed in ``journal`` (read-only, as ``show`` reads)."""
    if not journal.exists():
        return False
    done = subprocess.run(
        [sys.executable, "-m", "wheel_engine.cli", "show", str(journal), key, "--json"],
        capture_output=True,
        text=True,
    )
    return done.returncode == 0
