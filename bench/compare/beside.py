"""Another run's figures beside this one's (``--beside results.json``): issue 10 asks for the
compiled build's figures with the pure build's reported beside them.

The other run is read from the ``results.json`` it wrote; nothing is re-measured. Its targets
are matched to this run's by label and its ratios by comparison key and contender name, so the
two runs should use the same sizes (both full or both ``--quick``); a row the other run does
not have shows ``-``. Its build (``pure``/``compiled``, from ``wheel_engine.COMPILED``) names
its column; a run older than that record says ``other run``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.compare.measure import Comparison
from bench.compare.units import fmt_ratio_spread

__all__ = ["Beside", "load"]


class Beside:
    """The figures of another run, looked up by target label and by comparison."""

    def __init__(self, doc: dict[str, Any], source: str) -> None:
        machine = doc.get("machine", {})
        self.source = source
        self.build: str = machine.get("build") or "other run"
        self.commit: str = machine.get("git_commit") or "?"
        self.date: str = machine.get("date_utc") or "?"
        self.command: str = doc.get("command") or "?"
        self._targets = {t["label"]: t for t in doc.get("targets", [])}
        self._comparisons = {c["key"]: Comparison.from_dict(c) for c in doc.get("comparisons", [])}

    @property
    def column(self) -> str:
        """The heading of the columns holding this run's figures."""
        return f"{self.build} build" if self.build != "other run" else self.build

    def describe(self) -> str:
        return (
            f"Beside: the {self.column} (`{self.command}`, {self.date}, commit {self.commit}, "
            f"from {self.source})"
        )

    def target(self, label: str) -> str:
        """``status: detail`` of the other run's target ``label``, or ``-``."""
        t = self._targets.get(label)
        return f"{t['status']}: {t['detail']}" if t else "-"

    def ratio(self, key: str, name: str) -> str:
        """The other run's ratio of contender ``name`` in comparison ``key`` with its spread,
        or ``-``."""
        comp = self._comparisons.get(key)
        r = comp.ratios.get(name) if comp else None
        if r is None:
            return "-"
        return fmt_ratio_spread(r.median, r.low, r.high)


def load(path: Path) -> Beside:
    """Read another run's ``results.json``; raises ``OSError`` or ``ValueError`` if it cannot."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not a results.json ({exc})") from None
    if not isinstance(doc, dict) or "targets" not in doc:
        raise ValueError(f"{path}: not a results.json of wheel-engine bench")
    return Beside(doc, str(path))
