"""journal.postgres.client: the CLI's synchronous reads and writes, beside running nodes."""

from __future__ import annotations

from pg_support import db_now, open_store

from journal.postgres import PostgresClient


async def test_the_client_reads_and_writes_what_the_nodes_see(pg_url: str) -> None:
    node = await open_store(pg_url, "a", partitions=4)
    try:
        await node.maintain()
        with PostgresClient.connect(pg_url) as cli:
            assert cli.partitions == 4
            [t] = cli.schedule_many([cli.request("k", "h", 50.0, b"\x90")])
            cli.schedule_many([cli.request("j", "h", 10.0)])
            assert (await node.lookup("k")) == t.timer
            assert [r.key for r in cli.listing()] == ["j", "k"]
            assert [r.key for r in cli.listing(state="PENDING", limit=1)] == ["j"]
            summary = cli.summary()
            assert summary.states["PENDING"] == 2 and summary.owners == {"a": 4}
            assert summary.live_nodes == 1 and summary.last_version >= t.timer.version
            assert cli.cancel("k", version=t.timer.version + 1) == "NOT_FOUND"
            assert cli.cancel("k") == "CANCELED"
            assert cli.lookup("k").state == "CANCELED"  # type: ignore[union-attr]
            assert cli.redrive("j") is None
            assert (await node.summary()).states["CANCELED"] == 1
            assert db_now(pg_url) > 0
    finally:
        await node.close()
