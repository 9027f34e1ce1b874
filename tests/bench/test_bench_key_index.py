"""The key-index script of figure 7 at toy sizes."""

from __future__ import annotations

import gc

import pytest

from bench.compare import key_index


def test_the_cost_is_measured_and_the_collector_is_left_as_it_was() -> None:
    assert key_index.cost(100, operations=50) > 0
    assert gc.get_freeze_count() == 0


def test_each_size_gets_a_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert key_index.main(["100", "1000"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(" pending")[0].strip() for line in lines] == ["100", "1,000"]
    assert "+0.000 us" in lines[0]
