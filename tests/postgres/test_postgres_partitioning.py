"""journal.postgres.partitioning: the same key, the same partition, on every node and release."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

from journal.postgres import partition_of


def test_partitions_are_stable_across_processes_and_releases() -> None:
    # Fixed values: changing the hash would move every key of every existing journal.
    assert [partition_of(k, 64) for k in ("a", "order-17", "ключ")] == [
        partition_of(k, 64) for k in ("a", "order-17", "ключ")
    ]
    assert partition_of("a", 64) == 0xE8B7BE43 % 64
    code = "from journal.postgres import partition_of; print(partition_of('order-17', 256))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert int(out.stdout) == partition_of("order-17", 256)


def test_keys_spread_over_the_partitions() -> None:
    counts = Counter(partition_of(f"user-{i}", 64) for i in range(64_000))
    assert len(counts) == 64 and max(counts.values()) < 1.2 * 1000
