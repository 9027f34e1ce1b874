"""examples/tracing_console.py prints its four spans, the attempt linked to the schedule."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.sdk", reason="tests need opentelemetry-sdk")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tracing_console.py"


def test_console_example_prints_linked_spans() -> None:
    out = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    spans = {}
    decoder = json.JSONDecoder()
    at = out.find("{")
    while at != -1:
        span, end = decoder.raw_decode(out, at)
        spans[span["name"]] = span
        at = out.find("{", end)
    assert set(spans) == {
        "POST /orders",
        "schedule send_reminder",
        "fire send_reminder",
        "email the customer",
    }
    fired = spans["fire send_reminder"]
    assert fired["kind"] == "SpanKind.CONSUMER"
    assert (
        fired["links"][0]["context"]["span_id"]
        == spans["schedule send_reminder"]["context"]["span_id"]
    )
    assert spans["email the customer"]["parent_id"] == fired["context"]["span_id"]
