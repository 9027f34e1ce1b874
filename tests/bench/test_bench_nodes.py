"""bench.compare.nodes (figure 8): skipped with one line without a PostgreSQL server, and its
peer skipped when procrastinate is not installed; its node processes share a partition count."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from bench.compare import FIGURES, nodes
from bench.compare.config import Config
from bench.compare.measure import Log
from journal.postgres.schema import DEFAULT_PARTITIONS


def test_without_a_server_the_figure_is_skipped_with_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(nodes.URL_ENV, raising=False)
    out = io.StringIO()
    cfg = Config.make(True, tmp_path, Log(out))
    assert nodes.run(cfg, {}) == []
    lines = out.getvalue().splitlines()
    assert len(lines) == 1 and nodes.URL_ENV in lines[0], lines
    assert FIGURES["nodes"] == ("8", "nodes")


def test_the_peer_is_found_only_where_procrastinate_imports(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(nodes.PEER_ENV, sys.executable)
    try:
        import procrastinate  # noqa: F401
    except ImportError:
        assert nodes._peer_python() is None
    else:
        assert nodes._peer_python() == sys.executable


def test_the_figure_counts_the_partitions_the_engines_create() -> None:
    assert nodes.PARTITIONS == DEFAULT_PARTITIONS
    quick = nodes.Sizes.of(Config.make(True, Path("."), Log(io.StringIO(), verbose=False)))
    assert quick.reps == 1 and quick.timers <= 1_000  # bench-quick stays quick
