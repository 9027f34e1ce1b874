"""journal.postgres.partitioning: the same key, the same partition, on every node and release."""

from __future__ import annotations

import subprocess
import sys
import zlib
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from journal.postgres import partition_of
from journal.postgres.partitioning import recurrence_name
from journal.postgres.schema import MAX_PARTITIONS
from wheel_engine.recurring.records import rule_key
from wheel_engine.recurring.rule import check_recurrence_name, occurrence_key
from wheel_engine.validation import MAX_TIME


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


# -- a recurrence's keys take its name's partition (issue 25) ------------------------------------

_NAMES = st.text(min_size=1).filter(lambda s: "@" not in s and _encodes(s))
_DUE = st.floats(min_value=0, max_value=MAX_TIME, allow_nan=False)
_PARTITIONS = st.integers(min_value=1, max_value=MAX_PARTITIONS)


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _crc(key: str, partitions: int) -> int:
    return zlib.crc32(key.encode("utf-8")) % partitions


@given(name=_NAMES, nominal=_DUE, partitions=_PARTITIONS)
def test_every_key_of_a_recurrence_is_in_its_names_partition(
    name: str, nominal: float, partitions: int
) -> None:
    check_recurrence_name(name)  # a name the engine accepts
    home = _crc(name, partitions)
    occurrence = occurrence_key(name, nominal)
    for key in (rule_key(name), occurrence, occurrence_key(name, round(nominal))):
        assert partition_of(key, partitions) == home, key
    assert recurrence_name(occurrence) == name == recurrence_name(rule_key(name))


@given(key=st.text(min_size=1).filter(lambda s: "@" not in s and _encodes(s)), n=_PARTITIONS)
def test_a_key_without_an_at_sign_keeps_its_own_crc32(key: str, n: int) -> None:
    assert partition_of(key, n) == _crc(key, n)
    assert recurrence_name(key) is None


@given(
    name=st.text().filter(_encodes),
    rest=st.text().filter(lambda s: _encodes(s) and s != "rule" and not s.endswith("Z")),
    n=_PARTITIONS,
)
def test_another_key_with_an_at_sign_keeps_its_own_crc32(name: str, rest: str, n: int) -> None:
    key = f"{name}@{rest}"
    assert partition_of(key, n) == _crc(key, n)


@pytest.mark.parametrize(
    "key",
    [
        "user@example.com",
        "@rule",  # no name
        "a@b@rule",  # a name may not hold an @
        "a@b@2026-12-03T08:00:00Z",
        "s@2026-12-03T08:00:00",  # no Z
        "s@2026-12-03 08:00:00Z",
        "s@2026-12-03T08:00:00.1Z",  # neither milliseconds nor microseconds
        "s@2026-12-03T08:00:00.1234Z",
        "s@\uff12\uff10\uff12\uff16-12-03T08:00:00Z",  # fullwidth digits
        "s@rules",
        "s@Rule",
        "s@rule\n",
    ],
)
def test_keys_a_recurrence_never_has_keep_their_own_crc32(key: str) -> None:
    assert recurrence_name(key) is None
    assert partition_of(key, 64) == _crc(key, 64)


def test_the_recurrence_shapes_fixed() -> None:
    # Fixed values: what the recurrences' migration moved rows by, for the life of a journal.
    for key in ("s@rule", "s@2026-12-03T08:00:00Z", "s@2026-12-03T08:00:00.250Z"):
        assert partition_of(key, 64) == partition_of("s", 64) == 0x1B0ECF0B % 64
    assert partition_of("s@2026-12-03T08:00:00.000250Z", 4096) == 0x1B0ECF0B % 4096
