"""The backend seam (``wheel_engine/backends.py``): chosen once from the engine's path, and what
each backend answers about its journal and its own figures."""

from __future__ import annotations

from pathlib import Path

from wheel_engine import Engine
from wheel_engine.admin.api import EngineAPI
from wheel_engine.backends import MemoryBackend, NodeBackend, SqliteBackend
from wheel_engine.testing import VirtualClock


def test_no_path_is_the_memory_backend() -> None:
    engine = Engine(None, clock=VirtualClock())
    assert type(engine._backend) is MemoryBackend
    assert not engine._backend.shared
    assert engine.journal is None


async def test_a_file_is_the_sqlite_backend_whose_journal_is_the_engine_s(tmp_path: Path) -> None:
    engine = Engine(tmp_path / "j.db", clock=VirtualClock())
    assert type(engine._backend) is SqliteBackend
    assert not engine._backend.shared
    assert engine.journal is None  # before start
    async with engine:
        assert engine.journal is not None
        assert engine.journal.path == str(tmp_path / "j.db")
        assert "node" not in engine.stats()


def test_a_postgres_url_is_the_shared_node_backend() -> None:
    engine = Engine("postgresql://127.0.0.1:1/none", node="a", clock=VirtualClock())
    assert type(engine._backend) is NodeBackend
    assert engine._backend.shared
    assert engine.journal is None
    assert engine.stats()["node"] == "a"  # the node's figures, before it opens anything


def test_the_engine_offers_the_admin_commands_api() -> None:
    api: EngineAPI = Engine(None)  # mypy checks the shape; here, that it is all there
    for name in ("schedule", "cancel", "get", "timers", "stats", "redrive", "compact"):
        assert callable(getattr(api, name))
    assert api.path is None
