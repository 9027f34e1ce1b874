"""examples/orders_common.py's ``start_sweep`` on PostgreSQL: a rolling restart of the nodes
keeps the one sweep recurrence and its 5-minute grid (#25).

Each node start asks ``recurrences()`` before scheduling the sweep. On PostgreSQL that must list
the database's records, whichever node scheduled them: were it to list only the node's own
table (nothing), every start would schedule the sweep again and restart its grid, and nodes
restarted more often than every 5 minutes would never sweep.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import pytest

pytest.importorskip("psycopg", reason="the postgres extra: pip install -e '.[postgres]'")

from wheel_engine import Engine

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

pytestmark = pytest.mark.slow


def load() -> ModuleType:
    if str(EXAMPLES) not in sys.path:  # as the examples import it: beside them
        sys.path.insert(0, str(EXAMPLES))
    import orders_common

    return orders_common


async def test_a_rolling_restart_keeps_the_one_sweep_and_its_grid(
    pg_url: str, tmp_path: Path
) -> None:
    common = load()
    orders = common.Orders(str(tmp_path / "orders.db"))

    def started(name: str) -> Engine:
        engine = Engine(pg_url, node=name, lease=1.5)
        common.register_handlers(engine, orders)
        return engine

    try:
        async with started("a") as a:
            await common.start_sweep(a)
            [sweep] = await a.recurrences()
            async with started("b") as b:  # b starts while a runs, then a restarts
                await common.start_sweep(b)
            async with started("a") as again:
                await common.start_sweep(again)
                assert await again.recurrences() == [sweep]
    finally:
        orders.close()
    assert sweep.name == "orders-sweep" and sweep.every == common.SWEEP_EVERY
