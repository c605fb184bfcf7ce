"""The JSON, Markdown and HTML reports record the gates as the terminal and JUnit forms do: each gate passed or
failed with its measured value, and the baseline comparisons that were skipped and why; no gates section when no
gate was asked. A JSON report with the gates reads back as a baseline, and so does one written before them."""

from __future__ import annotations

import html as htmllib
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from markdown_it import MarkdownIt

from monitor.cli.replay_cmd import replay
from monitor.report import Baseline, load_baseline
from tests.monitor.offline.agents import SUPPORT_INPUTS, support_agent
from tests.monitor.offline.conftest import capture_spans, write_span_files

FORMS = ("json", "markdown", "html", "junit")
ACCURACY_UNDER = ("tool_call_accuracy", "tool_call_accuracy >= 95.00%", False,
                  "Tool call accuracy (tool_call_accuracy) 55.56% < 95.00%")
SPURIOUS_OVER = ("spurious_rate", "spurious_rate <= 50.00%", True,
                 "Spurious-call rate (spurious_rate) 22.22% <= 50.00%")
ACCURACY_DROP = ("tool_call_accuracy", "tool_call_accuracy: at most 2.00% worse than the baseline", False,
                 "Tool call accuracy (tool_call_accuracy) 90.00% -> 55.56%: worse by 34.44% (max drop 2.00%)")
SPURIOUS_DROP = ("spurious_rate", "spurious_rate: at most 2.00% worse than the baseline", True,
                 "Spurious-call rate (spurious_rate) 50.00% -> 22.22% (max drop 2.00%)")
# The baseline of the failing run: a figure replay does not compute, and the tool usage rate (never compared).
BASELINE = {"tool_call_accuracy": 0.9, "spurious_rate": 0.5, "pass_rate": 0.8, "tool_usage_rate": 0.7}
SKIPPED = [
    "Pass rate (all trials) (pass_rate) is in the baseline but not computed by this run (eval --dataset computes it)",
    "Tool usage rate (tool_usage_rate) has no better direction and is not compared with the baseline (gate it "
    "with --fail-under or --fail-over)",
]


@pytest.fixture(scope="module")
def batches() -> list[object]:
    return capture_spans(support_agent, SUPPORT_INPUTS)


def _replay(batches: list[object], rules: Path, out: Path, *gates: str) -> tuple[Result, dict[str, Path]]:
    """`toolwatch replay` of the support turns with `gates`, writing every report form under `out`."""
    files = write_span_files(batches, out / "in")
    paths = {form: out / f"report.{form}" for form in FORMS}
    args = [str(files["jsonl"]), "--rules", str(rules), "--no-progress"]
    for form, path in paths.items():
        args += [f"--{form}", str(path)]
    return CliRunner().invoke(replay, [*args, *gates]), paths


def _json_gates(path: Path) -> tuple[Any, Any]:
    data = json.loads(path.read_text(encoding="utf-8"))
    return data["gates"], data["skipped_comparisons"]


def _as_dicts(*gates: tuple[str, str, bool, str]) -> list[dict[str, object]]:
    return [{"figure": f, "name": n, "passed": p, "message": m} for f, n, p, m in gates]


def _md_section(path: Path) -> str | None:
    """The Gates section of the Markdown report rendered as GitHub does (None: no such section)."""
    html = str(MarkdownIt("commonmark").enable(["table"]).render(path.read_text(encoding="utf-8")))
    found = re.search(r"<h2>Gates</h2>(.*?)(?=<h2>|\Z)", html, re.S)
    return None if found is None else found[1]


def _cells(html: str) -> list[list[str]]:
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", html, re.S)
    return [[htmllib.unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", r, re.S)]
            for r in rows]


def _items(html: str) -> list[str]:
    return [htmllib.unescape(i) for i in re.findall(r"<li>(.*?)</li>", html, re.S)]


def _html_section(path: Path) -> str | None:
    """The Gates section of the HTML report (None: no such section)."""
    found = re.search(r'<section id="gates">(.*?)</section>', path.read_text(encoding="utf-8"), re.S)
    return None if found is None else found[1]


def _junit_gates(path: Path) -> list[str]:
    suite = ET.parse(path).getroot().find("testsuite")
    assert suite is not None
    return [c.get("name", "") for c in suite.findall("testcase") if c.get("classname") == "toolwatch.replay.gates"]


def test_json_markdown_and_html_record_each_gate_and_the_skipped_comparisons(
    batches: list[object], support_rules: Path, tmp_path: Path
) -> None:
    """A failing and a passing threshold, and a baseline: every form has the four gates in order with their
    measured values, and the comparisons the terminal says were skipped, in its order."""
    baseline = tmp_path / "base.json"
    baseline.write_text(json.dumps({"figures": BASELINE}), encoding="utf-8")
    res, paths = _replay(batches, support_rules, tmp_path, "--fail-under", "accuracy=0.95", "--fail-over",
                         "spurious_rate=0.5", "--baseline", str(baseline), "--max-drop", "0.02")
    assert res.exit_code == 1, res.output
    gates = (ACCURACY_UNDER, SPURIOUS_OVER, ACCURACY_DROP, SPURIOUS_DROP)
    said = [ln.removeprefix("Not compared with the baseline: ") for ln in res.output.splitlines()
            if ln.startswith("Not compared with the baseline: ")]
    assert said[:2] == SKIPPED and len(said) > 2
    assert all(line.endswith(") is not in the baseline") for line in said[2:])  # the figures it does not have
    assert _junit_gates(paths["junit"]) == [name for _, name, _, _ in gates]

    assert _json_gates(paths["json"]) == (_as_dicts(*gates), said)

    md = _md_section(paths["markdown"])
    assert md is not None
    assert "<p><strong>2 of 4 gates failed.</strong></p>" in md
    assert _cells(md) == [["gate", "result", "value"]] + [[n, "passed" if p else "FAILED", m] for _, n, p, m in gates]
    assert "<p>Not compared with the baseline:</p>" in md and _items(md) == said

    page = _html_section(paths["html"])
    assert page is not None
    assert '<p class="verdict bad" id="gates-verdict">2 of 4 gates failed.</p>' in page
    assert _cells(page) == [["gate", "result", "value"]] + [[n, "passed" if p else "failed", m]
                                                            for _, n, p, m in gates]
    rows = re.findall(r"<tr( class=\"failed\")?><td>([^<]*)</td><td class=\"(good|bad)\">", page)
    assert [(bool(failed), htmllib.unescape(name), cls) for failed, name, cls in rows] == [
        (not p, n, "good" if p else "bad") for _, n, p, _ in gates]
    assert _items(page) == said
    assert "tr.failed" in paths["html"].read_text(encoding="utf-8")  # failing rows are styled, not only classed


def test_gates_that_all_pass_say_so_in_every_form(batches: list[object], support_rules: Path, tmp_path: Path) -> None:
    res, paths = _replay(batches, support_rules, tmp_path, "--fail-under", "accuracy=50%")
    assert res.exit_code == 0, res.output
    assert "All gates passed." in res.output
    gate = ("tool_call_accuracy", "tool_call_accuracy >= 50.00%", True,
            "Tool call accuracy (tool_call_accuracy) 55.56% >= 50.00%")
    assert _json_gates(paths["json"]) == (_as_dicts(gate), [])
    md = _md_section(paths["markdown"])
    assert md is not None and "<p><strong>All 1 gate passed.</strong></p>" in md
    assert _cells(md)[1:] == [[gate[1], "passed", gate[3]]] and "Not compared" not in md
    page = _html_section(paths["html"])
    assert page is not None and '<p class="verdict good" id="gates-verdict">All 1 gate passed.</p>' in page
    assert _cells(page)[1:] == [[gate[1], "passed", gate[3]]] and "<ul" not in page and 'class="failed"' not in page


def test_a_baseline_that_compares_no_figure_is_a_failed_gate_in_every_form(
    batches: list[object], support_rules: Path, tmp_path: Path
) -> None:
    """--baseline alone, none of whose figures this run compares: it passed with no gate row (a regression gate
    passing on nothing); now one failed gate says so, in every form, beside the reasons nothing was compared."""
    from monitor.report.gates import NOTHING_COMPARED

    baseline = tmp_path / "base.json"
    baseline.write_text(json.dumps({"figures": {"pass_rate": 0.8}}), encoding="utf-8")
    res, paths = _replay(batches, support_rules, tmp_path, "--baseline", str(baseline))
    assert res.exit_code == 1, res.output
    gate = ("baseline", "at least one figure compared with the baseline", False, NOTHING_COMPARED)
    gates, skipped = _json_gates(paths["json"])
    assert gates == _as_dicts(gate) and skipped[0] == SKIPPED[0] and len(skipped) > 1  # and each not in the baseline
    md = _md_section(paths["markdown"])
    assert md is not None and "<p><strong>1 of 1 gate failed.</strong></p>" in md
    assert _cells(md)[1:] == [[gate[1], "FAILED", gate[3]]] and _items(md) == skipped
    page = _html_section(paths["html"])
    assert page is not None and '<p class="verdict bad" id="gates-verdict">1 of 1 gate failed.</p>' in page
    assert _cells(page)[1:] == [[gate[1], "failed", gate[3]]] and _items(page) == skipped
    assert _junit_gates(paths["junit"]) == [gate[1]]


def test_no_gate_asked_no_gates_section(batches: list[object], support_rules: Path, tmp_path: Path) -> None:
    res, paths = _replay(batches, support_rules, tmp_path)
    assert res.exit_code == 0, res.output
    assert _json_gates(paths["json"]) == (None, [])
    assert _md_section(paths["markdown"]) is None
    assert "Gates" not in paths["markdown"].read_text(encoding="utf-8")
    assert _html_section(paths["html"]) is None and "Gates" not in paths["html"].read_text(encoding="utf-8")
    assert _junit_gates(paths["junit"]) == []


def test_a_report_with_gates_reads_back_as_a_baseline(batches: list[object], support_rules: Path,
                                                       tmp_path: Path) -> None:
    res, paths = _replay(batches, support_rules, tmp_path / "first", "--fail-under", "accuracy=0.95")
    assert res.exit_code == 1, res.output
    data = json.loads(paths["json"].read_text(encoding="utf-8"))
    assert data["gates"] and data["gates"][0]["passed"] is False
    assert load_baseline(paths["json"]) == Baseline(data["figures"], None)
    again, second = _replay(batches, support_rules, tmp_path / "second", "--baseline", str(paths["json"]))
    assert again.exit_code == 0, again.output
    compared = _json_gates(second["json"])[0]
    assert compared and all(g["passed"] and g["message"].endswith("(max drop 0.00%)") for g in compared)


def test_an_old_report_without_the_gates_members_reads_as_a_baseline(
    batches: list[object], support_rules: Path, tmp_path: Path
) -> None:
    """A report written before the JSON had the gates: the same baseline, and a run gated on it gates alike."""
    res, paths = _replay(batches, support_rules, tmp_path / "first", "--fail-under", "accuracy=0.95")
    data = json.loads(paths["json"].read_text(encoding="utf-8"))
    old = {k: v for k, v in data.items() if k not in ("gates", "skipped_comparisons")}
    assert old.keys() == data.keys() - {"gates", "skipped_comparisons"} and old["schema_version"] == 1
    old_path = tmp_path / "old.json"
    old_path.write_text(json.dumps(old), encoding="utf-8")
    assert load_baseline(old_path) == load_baseline(paths["json"])
    runs = [_replay(batches, support_rules, tmp_path / name, "--baseline", str(p), "--max-drop", "0")
            for name, p in (("old", old_path), ("new", paths["json"]))]
    assert [r.exit_code for r, _ in runs] == [0, 0]
    assert _json_gates(runs[0][1]["json"]) == _json_gates(runs[1][1]["json"])
