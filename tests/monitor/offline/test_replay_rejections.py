"""Spans the normalizer rejects (an `execute_tool` span naming no tool: `missing_tool_name`) are reported by replay as
serve reports them (OTLP partial success, toolwatch_spans_rejected_total): replay had counted the decoder's
rejections only, and a capture whose calls were all unusable replayed with no word about them."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from monitor.cli.replay_cmd import replay
from tests.monitor.service.captures import DATA

RULES = """
version: 1
agent: weather_agent
catalog:
  tools:
    - name: get_weather
expect:
  - when: {prefix: "What is the weather"}
    call:
      - tool: get_weather
"""


def _without_tool_names(src: Path, dst: Path) -> int:
    """The capture with its execute_tool spans naming no tool (no gen_ai.tool.name, the span named `execute_tool`);
    how many there are."""
    n = 0
    lines = []
    for line in src.read_text().splitlines():
        doc: dict[str, Any] = json.loads(line)
        for rs in doc["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    if span["name"].startswith("execute_tool"):
                        span["name"] = "execute_tool"
                        span["attributes"] = [a for a in span["attributes"] if a["key"] != "gen_ai.tool.name"]
                        n += 1
        lines.append(json.dumps(doc))
    dst.write_text("\n".join(lines) + "\n")
    return n


def test_replay_reports_the_spans_the_normalizer_rejected(tmp_path: Path) -> None:
    capture = tmp_path / "capture.jsonl"
    n = _without_tool_names(DATA / "strands_default.jsonl", capture)
    assert n == 2
    (tmp_path / "rules.yaml").write_text(RULES)
    out, junit = tmp_path / "report.json", tmp_path / "report.xml"
    res = CliRunner().invoke(replay, [str(capture), "--rules", str(tmp_path / "rules.yaml"), "--no-progress",
                                      "--json", str(out), "--junit", str(junit)])  # fmt: skip
    assert res.exit_code in (0, 1), res.output
    report = json.loads(out.read_text())
    assert f"spans rejected by the normalizer: missing_tool_name={n}" in report["notes"], report["notes"]
    assert f"spans rejected by the normalizer: missing_tool_name={n}" in res.output
    cases = {c.get("name"): c for c in ET.parse(junit).getroot().iter("testcase")}
    problem = cases["spans rejected by the normalizer"].find("error")
    assert problem is not None and f"{n} span(s) rejected by the normalizer (missing_tool_name={n})" in (
        problem.get("message") or ""
    )
