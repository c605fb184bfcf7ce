"""The example agent runs and prints its spans (console exporter) and answers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "simple_agent.py"


def test_simple_agent_prints_spans_and_answers() -> None:
    done = subprocess.run([sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=60, check=True)
    out = done.stdout
    decoder = json.JSONDecoder()
    spans, index = [], out.find("{")
    while 0 <= index < out.find("\nQ: "):
        span, end = decoder.raw_decode(out, index)
        spans.append(span)
        index = out.find("{", end)
    names = sorted(s["name"] for s in spans)
    assert names == ["execute_tool convert_currency", "execute_tool get_stock_price", "execute_tool get_weather",
                     *["invoke_agent simple-agent"] * 4]
    hallucinated = next(s for s in spans if s["name"] == "execute_tool get_stock_price")
    assert hallucinated["status"]["status_code"] == "ERROR"
    assert hallucinated["attributes"]["error.type"] == "UnknownToolError"
    assert 'A: {"amount":129.6,"currency":"USD"}' in out
