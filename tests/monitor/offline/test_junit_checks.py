"""The JUnit report carries what the other forms say about the input, and the gates: a testcase per kind of input
problem (an <error>) and one per gate (passed, or a <failure> with the measured value), counted in the totals."""

from __future__ import annotations

import base64
import gzip
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

from monitor.cli.eval_cmd import eval_
from monitor.cli.probe_cmd import probe
from monitor.cli.replay_cmd import MAX_LISTED_ERRORS, replay
from tests.monitor.offline.agents import SUPPORT_INPUTS, support_agent
from tests.monitor.offline.conftest import TRIAGE_RULES, capture_spans, write_span_files


@pytest.fixture(scope="module")
def batches() -> list[object]:
    return capture_spans(support_agent, SUPPORT_INPUTS)


def _suite(path: Path) -> tuple[ET.Element, ET.Element]:
    root = ET.parse(path).getroot()
    suite = root.find("testsuite")
    assert suite is not None
    return root, suite


def _totals(el: ET.Element) -> dict[str, int]:
    return {k: int(el.get(k, "-1")) for k in ("tests", "failures", "errors", "skipped")}


def _of(suite: ET.Element, classname: str) -> dict[str, ET.Element]:
    return {c.get("name", ""): c for c in suite.findall("testcase") if c.get("classname") == classname}


def _b64_ids(line: str) -> str:
    """The request with its ids in base64 (the protobuf JSON mapping): the decoder rejects each of its spans."""
    doc = json.loads(line)
    spans = 0
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                spans += 1
                for key in ("traceId", "spanId", "parentSpanId"):
                    if span.get(key):
                        span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
    assert spans
    return json.dumps(doc)


def test_replay_junit_has_an_error_per_kind_of_input_problem(
    batches: list[object], support_rules: Path, tmp_path: Path
) -> None:
    """Undecodable lines (more than the table lists) and a request whose spans the decoder rejects: the run judges
    the rest and exits 0, and the JUnit file says what was skipped, bounded as the report's table is."""
    files = write_span_files(batches, tmp_path / "in")
    lines = files["jsonl"].read_text().splitlines()
    rejected = json.loads(lines[0])["resourceSpans"][0]["scopeSpans"][0]["spans"]
    extra = 3
    bad = [f'{{"not json {i}' for i in range(MAX_LISTED_ERRORS + extra)]
    src = tmp_path / "mixed.jsonl"
    src.write_text("\n".join([_b64_ids(lines[0]), *lines[1:], *bad]) + "\n")
    xml = tmp_path / "r.xml"
    res = CliRunner().invoke(replay, [str(src), "--rules", str(support_rules), "--no-progress", "-q",
                                      "--junit", str(xml)])
    assert res.exit_code == 0, res.output
    root, suite = _suite(xml)
    inputs = _of(suite, "toolwatch.replay.input")
    assert sorted(inputs) == ["spans rejected by the decoder", "undecodable records"]
    for case in inputs.values():
        assert [child.tag for child in case] == ["error"]
    undecodable = inputs["undecodable records"].find("error")
    assert undecodable is not None and undecodable.get("type") == "toolwatch.InputError"
    total = MAX_LISTED_ERRORS + extra
    assert undecodable.get("message", "").startswith(
        f"{total} undecodable record(s) skipped; first: {src}: line {len(lines) + 1}: ")
    listed = (undecodable.text or "").splitlines()
    assert len(listed) == MAX_LISTED_ERRORS + 1 and listed[-1] == f"… {extra} more"
    assert listed[1].startswith(f"{src}: line {len(lines) + 2}: ")
    spans = inputs["spans rejected by the decoder"].find("error")
    assert spans is not None
    n = len(rejected)
    assert spans.get("message", "").startswith(f"{n} of ") and f"rejected by the decoder (invalid_id={n})" in (
        spans.get("message") or "")
    assert (spans.text or "").splitlines()[0] == f"invalid_id: {n}"
    turns = [c for c in suite.findall("testcase") if not c.get("classname", "").startswith("toolwatch.replay.")]
    assert len(turns) == len(SUPPORT_INPUTS) - 1
    turn_failures = sum(c.find("failure") is not None for c in turns)
    expected = {"tests": len(turns) + 2, "failures": turn_failures, "errors": 2, "skipped": 0}
    assert _totals(root) == _totals(suite) == expected


def test_replay_junit_names_the_files_not_read_to_their_end(
    batches: list[object], support_rules: Path, tmp_path: Path
) -> None:
    """A cut .gz exits 2 (said only on stderr before): the JUnit file has an error naming the file and where."""
    files = write_span_files(batches, tmp_path / "in")
    data = gzip.compress(files["jsonl"].read_bytes())
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(data[: len(data) // 2])
    xml = tmp_path / "r.xml"
    res = CliRunner().invoke(replay, [str(cut), str(files["jsonl"]), "--rules", str(support_rules), "--no-progress",
                                      "-q", "--junit", str(xml)])
    assert res.exit_code == 2, res.output
    (line,) = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    root, suite = _suite(xml)
    (case,) = _of(suite, "toolwatch.replay.input").values()
    assert case.get("name") == "files not read to their end"
    error = case.find("error")
    assert error is not None and error.get("type") == "toolwatch.InputError"
    assert error.get("message") == f"1 file(s) not read to their end; first: {line.removeprefix('error: ')}"
    assert (error.text or "").splitlines() == [line.removeprefix("error: ")]
    assert _totals(root)["errors"] == 1 and _totals(root)["tests"] == len(suite.findall("testcase"))


def test_replay_junit_has_a_testcase_per_gate(batches: list[object], support_rules: Path, tmp_path: Path) -> None:
    """--fail-under, --fail-over and --baseline: one testcase each (a baseline gate per figure compared); the failed
    ones carry a <failure> with the measured value, the exit code stays 1."""
    files = write_span_files(batches, tmp_path / "in")
    baseline = tmp_path / "base.json"
    baseline.write_text(json.dumps({"figures": {"tool_call_accuracy": 0.9, "spurious_rate": 0.5}}))
    xml, js = tmp_path / "r.xml", tmp_path / "r.json"
    res = CliRunner().invoke(replay, [
        str(files["jsonl"]), "--rules", str(support_rules), "--no-progress", "--junit", str(xml), "--json", str(js),
        "--fail-under", "accuracy=0.95", "--fail-over", "spurious_rate=0.5", "--baseline", str(baseline),
        "--max-drop", "0.02"])
    assert res.exit_code == 1, res.output
    assert "FAILED 2 gate(s):" in res.output
    root, suite = _suite(xml)
    gates = _of(suite, "toolwatch.replay.gates")
    assert list(gates) == ["tool_call_accuracy >= 95.00%", "spurious_rate <= 50.00%",
                           "tool_call_accuracy: at most 2.00% worse than the baseline",
                           "spurious_rate: at most 2.00% worse than the baseline"]
    under = gates["tool_call_accuracy >= 95.00%"].find("failure")
    assert under is not None and under.get("type") == "toolwatch.GateFailed"
    assert under.get("message") == "Tool call accuracy (tool_call_accuracy) 55.56% < 95.00%"
    assert f"  - {under.get('message')}" in res.output
    drop = gates["tool_call_accuracy: at most 2.00% worse than the baseline"].find("failure")
    assert drop is not None and drop.get("message") == (
        "Tool call accuracy (tool_call_accuracy) 90.00% -> 55.56%: worse by 34.44% (max drop 2.00%)")
    spurious = json.loads(js.read_text())["figures"]["spurious_rate"]
    for name in ("spurious_rate <= 50.00%", "spurious_rate: at most 2.00% worse than the baseline"):
        assert [c.tag for c in gates[name]] == ["system-out"], name
        assert f"{spurious * 100:.2f}%" in (gates[name].findtext("system-out") or "")
    turns = len(SUPPORT_INPUTS)
    turn_failures = sum(c.find("failure") is not None for c in suite.findall("testcase")) - 2
    assert _totals(root) == _totals(suite) == {"tests": turns + 4, "failures": turn_failures + 2, "errors": 0,
                                               "skipped": 0}
    recorded = json.loads(js.read_text())["gates"]  # the JSON report has the same gates (test_report_gates)
    assert [(g["name"], g["passed"]) for g in recorded] == [
        (name, gates[name].find("failure") is None) for name in gates]


def test_replay_junit_gates_that_pass(batches: list[object], support_rules: Path, tmp_path: Path) -> None:
    files = write_span_files(batches, tmp_path / "in")
    xml = tmp_path / "r.xml"
    res = CliRunner().invoke(replay, [str(files["jsonl"]), "--rules", str(support_rules), "--no-progress", "-q",
                                      "--junit", str(xml), "--fail-under", "accuracy=50%"])
    assert res.exit_code == 0, res.output
    root, suite = _suite(xml)
    (gate,) = _of(suite, "toolwatch.replay.gates").values()
    assert gate.get("name") == "tool_call_accuracy >= 50.00%"
    assert gate.findtext("system-out") == "Tool call accuracy (tool_call_accuracy) 55.56% >= 50.00%"
    assert _totals(root)["tests"] == len(SUPPORT_INPUTS) + 1


def test_probe_junit_has_the_generator_error(tmp_path: Path) -> None:
    """A generator that raised ends the probe with exit 2: the JUnit file says so, with the traceback."""
    xml = tmp_path / "p.xml"
    res = CliRunner().invoke(probe, [
        "--generator", "tests.monitor.offline.test_probe:broken_generator", "--agent", "examples.triage.agent:triage",
        "--rules", str(TRIAGE_RULES), "--iterations", "3", "--no-progress", "-q", "--junit", str(xml)])
    assert res.exit_code == 2, res.output
    root, suite = _suite(xml)
    (case,) = _of(suite, "toolwatch.probe.input").values()
    assert case.get("name") == "generator"
    error = case.find("error")
    assert error is not None and error.get("type") == "toolwatch.InputError"
    assert error.get("message") == ("the generator tests.monitor.offline.test_probe:broken_generator raised "
                                    "RuntimeError: no more ideas; the probe stopped after 0 runs")
    assert "in broken_generator" in (error.text or "") and "RuntimeError: no more ideas" in (error.text or "")
    assert _totals(root) == {"tests": 1, "failures": 0, "errors": 1, "skipped": 0}


def _agent_name_problem(res_output: str, json_path: Path, xml: Path, command: str) -> None:
    """The problem that no rule applies to the agent's turns, in the JSON notes and as a JUnit input error."""
    problem = ("the rule files are scoped to agent(s) incident-triage and none to 'incident-triag', the agent name of "
               "these turns: no rule applies to them; give --agent-name")
    assert f"warning: {problem}" in res_output  # on stderr before the run, as before
    assert f"warning: {problem}" in json.loads(json_path.read_text())["notes"]
    _, suite = _suite(xml)
    (case,) = _of(suite, f"toolwatch.{command}.input").values()
    assert case.get("name") == "agent name"
    error = case.find("error")
    assert error is not None and error.get("type") == "toolwatch.InputError" and error.get("message") == problem


def test_eval_and_probe_record_a_misspelt_agent_name_in_the_report_and_junit(tmp_path: Path) -> None:
    """Turns that no rule applies to (--agent-name misspelt) were said only on stderr: the report and the JUnit file,
    what CI keeps, now say it too."""
    common = ["--agent", "examples.triage.agent:triage", "--rules", str(TRIAGE_RULES), "--agent-name", "incident-triag",
              "--no-progress", "-q", "--json", str(tmp_path / "e.json"), "--junit", str(tmp_path / "e.xml")]
    # a scenario file of no agent (one of another agent than --agent-name gives is refused) and no rules of its own
    text = Path("examples/triage/scenario.yaml").read_text(encoding="utf-8")
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text("".join(line for line in text.splitlines(keepends=True)
                                if not line.startswith(("agent:", "rules:"))), encoding="utf-8")
    res = CliRunner().invoke(eval_, ["--scenario", str(scenario), *common])
    assert res.exit_code == 0, res.output
    _agent_name_problem(res.output, tmp_path / "e.json", tmp_path / "e.xml", "eval")
    res = CliRunner().invoke(probe, [
        "--generator", "examples.triage.generator:generate", "--iterations", "3", *common])
    assert res.exit_code == 0, res.output
    _agent_name_problem(res.output, tmp_path / "e.json", tmp_path / "e.xml", "probe")


def test_a_rightly_named_agent_has_no_agent_name_problem(tmp_path: Path) -> None:
    res = CliRunner().invoke(probe, [
        "--generator", "examples.triage.generator:generate", "--agent", "examples.triage.agent:triage", "--rules",
        str(TRIAGE_RULES), "--iterations", "3", "--no-progress", "-q", "--junit", str(tmp_path / "p.xml")])
    assert res.exit_code == 0, res.output
    assert "no rule applies" not in res.output
    _, suite = _suite(tmp_path / "p.xml")
    assert not _of(suite, "toolwatch.probe.input")


def test_probe_says_a_misspelt_agent_name_once_before_the_report(tmp_path: Path) -> None:
    """The warning before the runs, then the report (its notes); the notes printed before the report skip it (it was
    printed three times)."""
    res = CliRunner().invoke(probe, [
        "--generator", "examples.triage.generator:generate", "--agent", "examples.triage.agent:triage", "--rules",
        str(TRIAGE_RULES), "--agent-name", "incident-triag", "--iterations", "3", "--no-progress"])
    assert res.exit_code == 0, res.output
    assert res.output.count("and none to 'incident-triag'") == 2, res.output
    assert res.output.index("and none to 'incident-triag'") < res.output.index("Tool call accuracy")
