"""eval: labelled cases run under the instrumentation, K trials (pass rate, pass^k), timeouts, scenarios."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from monitor.cli.eval_cmd import eval_
from monitor.evaluate import Harness, RunResult, load_dataset_rules, read_cases, run_eval
from monitor.evaluate._harness import run_turn
from monitor.judge import Judge
from monitor.records import RequestedCall, ToolCall, Turn
from monitor.replay import Replayer, replay_files
from monitor.rules import RuleFileError, load_rules
from monitor.scenario import build_judge, load_scenarios, run_scenarios
from monitor.verdict import TurnVerdict
from tests.monitor.offline.agents import reset_flaky
from tests.monitor.offline.conftest import REPO, capture_spans, write_span_files

DATASET = """
- id: o1
  input: where is order 1
  call: [{tool: get_order_status, exactly: 1, args: {order_id: "1"}}]
- id: o20
  input: where is order 20
  call: [{tool: get_order_status, exactly: 1, args: {order_id: "20"}}]
- id: hi
  input: hello there
  none: true
"""

SCENARIOS = """
agent: support
rules: [support.yaml]
scenarios:
  - name: order-then-eta
    steps:
      - user: where is order 1
        expect:
          calls: [{tool: get_order_status, args: {order_id: "1"}}]
          response: {contains: shipped}
        reference: Order 1 has shipped.
      - user: when will it arrive?
        expect:
          calls:
            - tool: get_shipping_eta
              args: {order_id: "1"}
            - tool: get_order_status
              optional: true
          response: {regex: '(?i)arrive'}
          tool_calls: {min: 1, max: 1}
        reference: Order 1 should arrive in 2 days.
      - user: thanks!
        expect: {none: true, tool_calls: {max: 0}}
"""


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    p = tmp_path / "cases.yaml"
    p.write_text(DATASET, encoding="utf-8")
    return p


@pytest.mark.parametrize("concurrency", [1, 4])
def test_trials_pass_rate_and_pass_hat_k(dataset: Path, support_rules: Path, concurrency: int) -> None:
    from tests.monitor.offline.agents import flaky_agent

    reset_flaky()
    judge = Judge(load_dataset_rules(dataset, [support_rules]))
    cases = read_cases(dataset)
    assert [c.case_id for c in cases] == ["o1", "o20", "hi"]
    with Harness(agent_name="support") as h:
        result = run_eval(cases, flaky_agent, judge, h, trials=4, concurrency=concurrency, timeout_s=10)
    per_case = {name: sum(t.passed for t in ts) for name, ts in result.by_case().items()}
    assert per_case == {"o1": 4, "o20": 2, "hi": 4}
    assert all(t.verdict is not None and t.verdict.rule == f"case:{t.case.case_id}" for t in result.trials)
    assert result.pass_rate == pytest.approx(10 / 12)
    assert result.pass_hat(4) == pytest.approx(2 / 3)
    assert result.pass_hat(2) == pytest.approx((1 + math.comb(2, 2) / math.comb(4, 2) + 1) / 3)
    failing = next(t for t in result.trials if not t.passed)
    assert "get_shipping_eta" in failing.reason


def test_cli_eval_with_trials_timeout_and_junit(dataset: Path, support_rules: Path, tmp_path: Path) -> None:
    reset_flaky()
    with dataset.open("a") as fh:
        fh.write("- id: slow\n  input: where is order 99\n  call: [{tool: get_order_status}]\n")
    junit, js = tmp_path / "eval.xml", tmp_path / "eval.json"
    args = ["--dataset", str(dataset), "--rules", str(support_rules), "--agent",
            "tests.monitor.offline.agents:flaky_agent", "--trials", "2", "--concurrency", "4", "--timeout", "0.5",
            "--no-progress", "--junit", str(junit), "--json", str(js), "--fail-under", "pass_rate=0.9"]
    res = CliRunner().invoke(eval_, args)
    assert res.exit_code == 1, res.output  # pass rate 5/8 is under 0.9
    assert "Pass rate (all trials) (pass_rate) 62.50% < 90.00%" in res.output
    assert "Tool call accuracy:" in res.output
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and suite.get("tests") == "9"  # 8 trials and the gate
    (gate,) = [c for c in suite.findall("testcase") if c.get("classname") == "toolwatch.eval.gates"]
    failure = gate.find("failure")
    assert gate.get("name") == "pass_rate >= 90.00%" and failure is not None
    assert failure.get("message") == "Pass rate (all trials) (pass_rate) 62.50% < 90.00%"
    errors = [c for c in suite.findall("testcase") if c.find("error") is not None]
    assert sorted(c.get("name", "") for c in errors) == ["slow trial 1", "slow trial 2"]
    assert "timed out after 0.5 s" in (errors[0].find("error").get("message") or "")  # type: ignore[union-attr]
    figures = json.loads(js.read_text())["figures"]
    assert figures["pass_rate"] == pytest.approx(5 / 8) and figures["pass_hat_k"] == pytest.approx(2 / 4)


def test_agent_exception_fails_the_trial_and_keeps_its_calls(dataset: Path, support_rules: Path) -> None:
    from tests.monitor.offline.agents import raising_agent

    judge = Judge(load_dataset_rules(dataset, [support_rules]))
    with Harness(agent_name="support") as h:
        result = run_eval(read_cases(dataset)[:1], raising_agent, judge, h)
    (trial,) = result.trials
    assert not trial.passed and "RuntimeError: model backend down" in trial.reason
    assert trial.verdict is not None and [c.outcome.value for c in trial.verdict.calls] == ["correct"]


@pytest.mark.parametrize("timeout_s", [None, 10.0])
@pytest.mark.parametrize("agent_name", ["cancelled_agent", "exiting_agent"])
def test_an_agent_ended_by_a_base_exception_fails_its_trials_and_the_eval_goes_on(
        dataset: Path, support_rules: Path, agent_name: str, timeout_s: float | None) -> None:
    """CancelledError (an async agent's cancelled task) and SystemExit are BaseExceptions, not Exceptions: such a run
    failed like any other that raised, it neither passes (its calls were right) nor stops the whole eval."""
    from tests.monitor.offline import agents

    judge = Judge(load_dataset_rules(dataset, [support_rules]))
    with Harness(agent_name="support") as h:
        result = run_eval(read_cases(dataset)[:2], getattr(agents, agent_name), judge, h, trials=2, concurrency=2,
                          timeout_s=timeout_s)
    assert len(result.trials) == 4 and result.pass_rate == 0.0 and result.pass_hat(2) == 0.0
    kind = "CancelledError" if agent_name == "cancelled_agent" else "SystemExit"
    for trial in result.trials:
        assert not trial.passed and trial.run.error is not None and trial.run.error.startswith(kind), trial.run.error
        assert f"agent raised {kind}" in trial.reason and trial.run.traceback
        assert trial.verdict is not None and [c.outcome.value for c in trial.verdict.calls] == ["correct"]


def test_an_async_agent_past_its_timeout_is_cancelled_not_left_running(dataset: Path, support_rules: Path) -> None:
    """A sync agent's thread cannot be stopped, but an async agent's task can: it was left running after its timeout
    (its thread and its model calls went on, a thread per hung run piling up under --concurrency), and its traceback
    was the event loop's, not the agent's."""
    from tests.monitor.offline.agents import ASYNC_CANCELLED, hanging_async_agent

    ASYNC_CANCELLED.clear()
    judge = Judge(load_dataset_rules(dataset, [support_rules]))
    with Harness(agent_name="support") as h:
        result = run_eval(read_cases(dataset)[:1], hanging_async_agent, judge, h, timeout_s=0.3)
    (trial,) = result.trials
    assert trial.run.timed_out and not trial.passed
    assert ASYNC_CANCELLED.wait(1.0), "the agent's task was not cancelled at the timeout"
    alive = [t for t in threading.enumerate() if t.name == "toolwatch-agent" and t.is_alive()]
    assert not alive
    assert trial.run.traceback is not None and "hanging_async_agent" in trial.run.traceback, trial.run.traceback
    assert trial.verdict is not None and [c.outcome.value for c in trial.verdict.calls] == ["wrong_tool"]


def test_an_async_agent_whose_coroutine_comes_after_the_timeout_is_not_started(dataset: Path,
                                                                               support_rules: Path) -> None:
    """An agent whose synchronous part outlasts the timeout, then returns a coroutine: that coroutine is not run
    (the run was cancelled before it started), and closed, not left 'never awaited'."""
    import gc
    import time
    import warnings

    ran = threading.Event()

    async def late() -> str:
        ran.set()
        return "Order 1 has shipped."

    def slow_then_async(text: str) -> object:
        time.sleep(0.4)
        return late()

    judge = Judge(load_dataset_rules(dataset, [support_rules]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Harness(agent_name="support") as h:
            (trial,) = run_eval(read_cases(dataset)[:1], slow_then_async, judge, h, timeout_s=0.1).trials
        for t in threading.enumerate():
            if t.name == "toolwatch-agent":
                t.join(5)
        gc.collect()
    assert trial.run.timed_out and not ran.is_set()
    assert not [w for w in caught if "never awaited" in str(w.message)], [str(w.message) for w in caught]


def test_a_long_input_and_answer_are_judged_whole(tmp_path: Path, support_rules: Path) -> None:
    """The span keeps at most 16,384 characters of the input and of the answer (the content length), and a cut one
    reads as not captured. The harness has both whole: an answer past that length had its response checks skipped
    (a case passed whose answer lacked the required line), and an input past it made `from_input` checks fail."""
    from tests.monitor.offline.agents import EXECUTOR

    pad = "x" * 20_000
    dataset = tmp_path / "cases.yaml"
    dataset.write_text(
        f"- id: long-answer\n  input: where is order 1\n  call: [{{tool: get_order_status}}]\n"
        f"  respond: [{{regex: '(?m)^Result: '}}]\n"
        f"- id: long-answer-ok\n  input: where is order 2\n  call: [{{tool: get_order_status}}]\n"
        f"  respond: [{{regex: '(?m)^Result: '}}]\n"
        f"- id: long-input\n  input: '{pad} where is order 3 {pad}'\n"
        f"  call: [{{tool: get_order_status, args: {{order_id: {{from_input: 'order (\\d+)'}}}}}}]\n",
        encoding="utf-8")

    def verbose_agent(text: str) -> str:
        n = text.split("order ")[1].split()[0]
        EXECUTOR.execute("get_order_status", {"order_id": n})
        return pad + ("\nResult: shipped" if n == "2" else "")

    judge = Judge(load_dataset_rules(dataset, [support_rules]))
    with Harness(agent_name="support") as h:
        result = run_eval(read_cases(dataset), verbose_agent, judge, h)
    got = {t.case.key: (t.passed, t.verdict.response_ok if t.verdict else None) for t in result.trials}
    assert got == {"long-answer": (False, False), "long-answer-ok": (True, True), "long-input": (True, None)}, got


def test_dataset_errors_name_the_file(tmp_path: Path, support_rules: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("- id: a\n  call: [{tool: get_order_status}]\n")
    res = CliRunner().invoke(eval_, ["--dataset", str(bad), "--rules", str(support_rules), "--agent",
                                     "tests.monitor.offline.agents:support_agent", "--no-progress"])
    assert res.exit_code == 2 and "bad.yaml" in res.output and "input" in res.output
    res = CliRunner().invoke(eval_, ["--dataset", str(bad), "--agent", "nope.module:fn"])
    assert res.exit_code == 2 and "cannot import" in res.output


@pytest.mark.parametrize(
    "name, text, error",
    [  # each was a RecursionError traceback (yaml.safe_load, json.loads), or a crash of the YAML composer in C
        ("deep.jsonl", '{"input": "x", "a": ' + "[" * 5000 + "]" * 5000 + "}\n",
         "deep.jsonl:1:1: JSON: nested deeper than 100 levels"),
        ("deep2.jsonl", '{"input": "x"}\n{"input": "y", "a": ' + "[" * 150 + "]" * 150 + "}\n",
         "deep2.jsonl:2:1: JSON: nested deeper than 100 levels"),
        ("deep.yaml", "- input: x\n  a:\n    " + "- " * 5000 + "x\n", "deep.yaml:3:203: YAML: nested deeper than 100"),
        ("laughs.yaml", "- input: x\n  a0: &a0 [" + ", ".join(["l"] * 10) + "]\n" + "".join(
            f"  a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]\n" for i in range(1, 9)),
         "YAML: aliases add more than 1,000,000 values"),
        ("latin1.yaml", "- input: caf\xe9\n", "latin1.yaml:1:13: not UTF-8: byte(s) 0xe9"),
    ],
)
def test_a_bad_dataset_is_a_located_error(tmp_path: Path, support_rules: Path, name: str, text: str, error: str
                                           ) -> None:
    path = tmp_path / name
    path.write_bytes(text.encode("latin-1"))
    res = subprocess.run(
        [sys.executable, "-c", "from monitor.cli import main; main()", "eval", "--dataset", str(path),
         "--rules", str(support_rules), "--agent", "tests.monitor.offline.agents:support_agent", "--no-progress"],
        capture_output=True, text=True, timeout=60, cwd=REPO)
    assert res.returncode == 2, res.stderr[-3000:]
    assert "Traceback" not in res.stderr and error in res.stderr, res.stderr[-3000:]


BAD_CASES = [  # (file name, text, the located errors expected, each on a line of its own)
    ("bad.yaml",
     "- id: a\n  input: where is order 1\n  call: [{tool: get_order_status}]\n"
     "- id: a\n  input: where is order 2\n  call: [{tool: get_order_status}]\n"
     "- id: b\n  call: [{tool: get_order_status}]\n"
     "- id: c\n  input: where is order 3\n  call: [{tool: lookup_order}]\n"
     "- id: d\n  none: true\n",
     ["bad.yaml:4:3: id: duplicate case id 'a' (first at line 1)", "bad.yaml:7:3: [2]: `input`",
      "bad.yaml:11:17: [3].call[0].tool: unknown tool 'lookup_order'", "bad.yaml:12:3: [4]: `input`"]),
    ("types.yaml", "- id: a\n  input: where is order 1\n  none: true\n- just a string\n- id: b\n  input: 5\n",
     ["types.yaml:4:3: [1]: expected object", "types.yaml:6:10: [2].input: expected string"]),
    ("bad.jsonl",
     '{"id": "a", "input": "where is order 1", "call": [{"tool": "get_order_status"}]}\n'
     '{"id": "a", "input": "where is order 2", "call": [{"tool": "get_order_status"}]}\n\n'
     '{"id": "b", "call": [{"tool": "get_order_status"}]}\n',
     ["bad.jsonl:2:1: id: duplicate case id 'a' (first at line 1)", "bad.jsonl:4:1: [2]: `input`"]),
    ("rulefile.yaml",
     "version: 1\ncases:\n  - id: a\n    input: where is order 1\n    none: true\n"
     "  - id: a\n    input: where is order 2\n    none: true\n  - id: b\n    none: true\n",
     ["rulefile.yaml:6:5: id: duplicate case id 'a' (first at line 3)", "rulefile.yaml:9:5: cases[2]: `input`"]),
]


@pytest.mark.parametrize("name, text, errors", BAD_CASES)
def test_every_error_of_a_dataset_is_reported_at_once_with_its_line(tmp_path: Path, support_rules: Path, name: str,
                                                                      text: str, errors: list[str]) -> None:
    """A duplicate id, a case without `input` and a case that is no mapping were reported one at a time, at line 0
    column 0 (`bad.yaml:0:0: case 2: duplicate case id 'a'`), and hid the rule loader's errors (an unknown tool)."""
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    res = CliRunner().invoke(eval_, ["--dataset", str(path), "--rules", str(support_rules), "--agent",
                                     "tests.monitor.offline.agents:support_agent", "--no-progress"])
    assert res.exit_code == 2, res.output
    lines = res.output.splitlines()
    for error in errors:
        assert any(error in line for line in lines), (error, res.output)
    assert ":0:0:" not in res.output and len([ln for ln in lines if f"{name}:" in ln]) == len(errors), res.output
    with pytest.raises(RuleFileError) as raised:
        read_cases(path)
    assert all(e.line > 0 for e in raised.value.errors)


@pytest.fixture
def scenario_file(tmp_path: Path, support_rules: Path) -> Path:
    (tmp_path / "support.yaml").write_text(support_rules.read_text())
    p = tmp_path / "scenario.yaml"
    p.write_text(SCENARIOS, encoding="utf-8")
    return p


def test_scenarios_free_run_and_step_wise(scenario_file: Path) -> None:
    from tests.monitor.offline.agents import memory_agent

    sf = load_scenarios(scenario_file)
    judge = build_judge(sf)
    results = {}
    with Harness(agent_name="support") as h:
        for mode in ("free", "step"):
            results[mode] = run_scenarios(sf, memory_agent, judge, h, mode=mode)
    free, step = results["free"], results["step"]
    assert [s.passed for s in free.steps] == [True, False, True]
    assert [s.passed for s in step.steps] == [True, True, True]
    bad = free.steps[1]
    assert not bad.count_ok and "missed get_shipping_eta" in bad.reason and "0 tool call(s)" in bad.reason
    assert step.steps[1].verdict is not None and step.steps[1].verdict.response_ok is True
    assert free.pass_rate == pytest.approx(2 / 3) and step.scenarios_passed() == (1, 1)
    conv = {s.run.turns[0].conversation_id for s in free.steps}
    assert len(conv) == 1 and None not in conv


def test_cli_scenario_modes(scenario_file: Path, tmp_path: Path) -> None:
    base = ["--scenario", str(scenario_file), "--agent", "tests.monitor.offline.agents:memory_agent", "--no-progress"]
    res = CliRunner().invoke(eval_, [*base, "--mode", "step", "--fail-under", "scenario_pass_rate=1"])
    assert res.exit_code == 0, res.output
    assert "1/1 scenario(s) passed every step (step mode)" in res.output
    res = CliRunner().invoke(eval_, [*base, "--fail-under", "scenario_pass_rate=1"])
    assert res.exit_code == 1 and "Scenario step pass rate (scenario_pass_rate) 66.67% < 100.00%" in res.output


def test_cli_step_mode_warns_of_each_step_whose_own_reply_is_fed_forward(scenario_file: Path, tmp_path: Path) -> None:
    """Step-wise mode feeds the scenario's reference replies forward; a step without `reference` (but the last of its
    scenario, whose reply nobody reads) feeds the agent's own reply instead: a warning says so, once per such step,
    naming it, where the run's other warnings go (the report's notes; stderr with -q). Free-run mode feeds the
    agent's replies anyway and warns of nothing."""
    text = SCENARIOS.replace("        reference: Order 1 has shipped.\n", "")
    text += ("  - name: second\n    steps:\n      - user: hello\n      - user: where is order 2\n"
             "      - user: thanks!\n        reference: ok\n")
    scenario_file.write_text(text, encoding="utf-8")
    expected = [
        f"step mode: {scenario_file}:{line}: scenario {name}, step {step} has no `reference`: the agent's own reply "
        "is fed to the next step" for line, name, step in (
            (text.splitlines().index("      - user: where is order 1") + 1, "order-then-eta", 1),
            (text.splitlines().index("      - user: hello") + 1, "second", 1),
            (text.splitlines().index("      - user: where is order 2") + 1, "second", 2),
        )
    ]
    base = ["--scenario", str(scenario_file), "--agent", "tests.monitor.offline.agents:memory_agent", "--no-progress"]
    js = tmp_path / "report.json"
    for mode, warned in (("step", expected), ("free", [])):
        res = CliRunner().invoke(eval_, [*base, "--mode", mode, "-q", "--json", str(js)])
        assert [ln for ln in res.stderr.splitlines() if ln.startswith("warning: ")] == [
            f"warning: {w}" for w in warned], res.stderr
        notes = json.loads(js.read_text())["notes"]
        assert [n for n in notes if n.startswith("step mode: ")] == warned


def test_scenario_file_errors(tmp_path: Path) -> None:
    from monitor.scenario import ScenarioError

    p = tmp_path / "s.yaml"
    p.write_text("steps:\n  - user: hi\n    expect: {calls: [{tool: a, bogus: 1}]}\n")
    with pytest.raises(ScenarioError, match=r"s\.yaml:3:32: scenario-1, step 1, call 1: unknown key 'bogus'"):
        load_scenarios(p)
    p.write_text("steps: [{user: hi, expect: {tool_calls: {min: -1}}}]\n")
    with pytest.raises(ScenarioError, match="non-negative"):
        load_scenarios(p)


def test_shipped_triage_examples_run_and_fail_where_the_agent_is_flawed() -> None:
    from tests.monitor.offline.conftest import REPO, TRIAGE_RULES

    dataset = REPO / "examples" / "triage" / "cases.yaml"
    judge = Judge(load_dataset_rules(dataset, [TRIAGE_RULES]))
    from monitor.evaluate import load_callable

    triage = load_callable("examples.triage.agent:triage")
    with Harness(agent_name="incident-triage") as h:
        result = run_eval(read_cases(dataset), triage, judge, h, trials=2)
        failing = {name for name, ts in result.by_case().items() if not any(t.passed for t in ts)}
        assert failing == {"risk-sev1", "supp-quoted", "auth-deep-queue", "bill-distractor-long"}
        assert result.pass_rate == 0.5 and result.pass_hat(2) == 0.5
        sf = load_scenarios(REPO / "examples" / "triage" / "scenario.yaml")
        run = run_scenarios(sf, triage, build_judge(sf), h, mode="step")
    assert [s.passed for s in run.steps] == [True, True, False]
    assert "extra call pull_support_telemetry" in run.steps[2].reason


def _eval(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(eval_, [*args, "--no-progress", "-q"])
    return res.exit_code, res.output


# the tool usage rate has no better direction: a baseline never compares it, and says so
USAGE_NOT_COMPARED = "(tool_usage_rate) has no better direction and is not compared with the baseline " \
                     "(gate it with --fail-under or --fail-over)"


def test_cli_eval_records_k_and_compares_a_baseline_of_another_k_but_its_pass_hat_k(
    dataset: Path, support_rules: Path, tmp_path: Path
) -> None:
    """A baseline of another k (or a run that computes no pass^k, --trials 1): every other figure is compared, and a
    line says pass^k is not (as the README says), instead of a usage error."""
    base = ["--dataset", str(dataset), "--rules", str(support_rules), "--agent",
            "tests.monitor.offline.agents:flaky_agent"]
    js = tmp_path / "k3.json"
    reset_flaky()
    assert _eval(*base, "--trials", "3", "--json", str(js))[0] == 0
    data = json.loads(js.read_text())
    assert data["k"] == 3 and data["figures"]["pass_hat_k"] == pytest.approx(2 / 3)
    for trials, skipped in (
        ("2", "(pass_hat_k): pass^3 in the baseline, pass^2 now: different k are not comparable"),
        ("1", "(pass_hat_k) is in the baseline but not computed by this run (eval --dataset computes it with --trials "
              "2 or more)"),
    ):
        reset_flaky()
        code, out = _eval(*base, "--trials", trials, "--baseline", str(js), "--max-drop", "0.1")
        assert code == 0 and "Tool call accuracy:" in out, out
        (line, usage) = [ln for ln in out.splitlines() if ln.startswith("Not compared with the baseline:")]
        assert line.endswith(skipped) and usage.endswith(USAGE_NOT_COMPARED) and "All gates passed." in out
    data["figures"]["pass_rate"] = 1.0  # the other figures are still compared: a drop of the pass rate fails
    js.write_text(json.dumps(data))
    reset_flaky()
    code, out = _eval(*base, "--trials", "2", "--baseline", str(js), "--max-drop", "0.1")
    assert code == 1 and "FAILED 1 gate(s):\n  - Pass rate (all trials) (pass_rate) 100.00% -> 83.33%" in out, out
    reset_flaky()
    code, out = _eval(*base, "--trials", "3", "--baseline", str(js), "--max-drop", "0.5")
    (usage,) = [ln for ln in out.splitlines() if ln.startswith("Not compared with the baseline:")]
    assert code == 0 and usage.endswith(USAGE_NOT_COMPARED) and "All gates passed." in out


def test_cli_eval_says_pass_hat_k_is_not_compared_with_a_baseline_of_one_trial(
    dataset: Path, support_rules: Path, tmp_path: Path
) -> None:
    """A baseline of --trials 1 has no pass^k: --trials 3 against it cannot regress pass^3, and says so rather than
    passing in silence (the mirror of a --trials 1 run against a baseline of --trials 3)."""
    base = ["--dataset", str(dataset), "--rules", str(support_rules), "--agent",
            "tests.monitor.offline.agents:flaky_agent"]
    js = tmp_path / "k1.json"
    reset_flaky()
    assert _eval(*base, "--json", str(js))[0] == 0
    reset_flaky()
    code, out = _eval(*base, "--trials", "3", "--baseline", str(js), "--max-drop", "0.5")
    assert code == 0 and "All gates passed." in out, out
    (usage, line) = [ln for ln in out.splitlines() if ln.startswith("Not compared with the baseline:")]
    assert line.endswith("(pass_hat_k) is not in the baseline"), line
    assert usage.endswith(USAGE_NOT_COMPARED), usage


def test_cli_eval_dataset_baseline_with_scenarios(dataset: Path, support_rules: Path, scenario_file: Path,
                                                  tmp_path: Path) -> None:
    js = tmp_path / "eval.json"
    reset_flaky()
    assert _eval("--dataset", str(dataset), "--rules", str(support_rules), "--agent",
                 "tests.monitor.offline.agents:flaky_agent", "--trials", "2", "--json", str(js))[0] == 0
    code, out = _eval("--scenario", str(scenario_file), "--agent", "tests.monitor.offline.agents:memory_agent",
                      "--mode", "step", "--baseline", str(js), "--max-drop", "1")
    assert code == 0, out  # scenarios compute no pass rate and no pass^k: not compared, said so
    assert "(pass_rate) is in the baseline but not computed by this run (eval --dataset computes it)" in out
    assert "(pass_hat_k) is in the baseline but not computed by this run (eval --dataset computes it with" in out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--trials", "2"], "--trials applies to --dataset (runs per case, cases at once), not to --scenario"),
        (["--trials", "1"], "--trials applies to --dataset"),
        (["--concurrency", "4"], "--concurrency applies to --dataset"),
        (["--trials", "3", "--concurrency", "2"], "--trials and --concurrency apply to --dataset"),
    ],
)
def test_cli_dataset_options_with_a_scenario_are_usage_errors(scenario_file: Path, extra: list[str],
                                                              message: str) -> None:
    code, out = _eval("--scenario", str(scenario_file), "--agent", "tests.monitor.offline.agents:memory_agent", *extra)
    assert code == 2 and message in out


@pytest.mark.parametrize("mode", ["step", "free"])
def test_cli_mode_with_a_dataset_is_a_usage_error(dataset: Path, support_rules: Path, mode: str) -> None:
    code, out = _eval("--dataset", str(dataset), "--rules", str(support_rules), "--agent",
                      "tests.monitor.offline.agents:support_agent", "--mode", mode)
    assert code == 2 and "--mode applies to --scenario (free-run or step-wise conversations), not to --dataset" in out


def test_cli_eval_one_trial_cases_in_natural_order_no_pass_hat_k_and_quiet(support_rules: Path, tmp_path: Path) -> None:
    cases = tmp_path / "cases.yaml"
    cases.write_text(
        "".join(
            f"- id: c{n}\n  input: where is order {n}\n  call: [{{tool: get_order_status}}]\n" for n in (1, 10, 2, 20)
        ),
        encoding="utf-8",
    )
    js = tmp_path / "r.json"
    base = [
        "--dataset",
        str(cases),
        "--rules",
        str(support_rules),
        "--agent",
        "tests.monitor.offline.agents:support_agent",
    ]
    res = CliRunner().invoke(eval_, [*base, "--no-progress", "--json", str(js)])
    assert res.exit_code == 0, res.output
    data = json.loads(js.read_text())
    assert [row[0] for row in data["tables"][0]["rows"]] == ["c1", "c2", "c10", "c20"]  # all pass: by name
    assert "pass_hat_k" not in data["figures"] and "pass^k" not in res.stdout  # pass^1 is the pass rate
    res = CliRunner().invoke(eval_, [*base, "--trials", "2", "--no-progress"])
    assert "pass^2 (chance that 2 trials of a case all pass)" in res.stdout
    res = CliRunner().invoke(eval_, [*base, "-q"])  # the progress bar is on, but -q silences it
    assert res.exit_code == 0 and res.stdout == "Tool call accuracy: 4/4 (100.0%)\n" and res.stderr == ""


def _hang_dataset(path: Path, orders: range) -> Path:
    path.write_text("".join(f"- id: o{n}\n  input: where is order {n}\n"
                            f"  call: [{{tool: get_order_status, exactly: 1, args: {{order_id: '{n}'}}}}]\n"
                            for n in orders), encoding="utf-8")
    return path


def _ctrl_c_during_eval(dataset: Path, rules: Path, agent: str, log: Path, *extra: str
                        ) -> tuple[subprocess.Popen[str], str, float]:
    """Run `eval` in a process, send it SIGINT once its first run has started (as it logs to `log`); the process, its
    stderr, and the seconds from the signal to its exit."""
    import signal
    import time

    log.touch()
    code = ("import signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
            "from monitor.cli import main; main()")
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "eval", "--dataset", str(dataset), "--rules", str(rules), "--agent",
         f"tests.monitor.offline.agents:{agent}", "--no-progress", *extra],
        cwd=REPO, env={**os.environ, "TOOLWATCH_TEST_RUN_LOG": str(log)}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not log.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert log.read_text(), "no run started"
    proc.send_signal(signal.SIGINT)
    sent = time.monotonic()
    _, err = proc.communicate(timeout=90)
    return proc, err, time.monotonic() - sent


@pytest.mark.parametrize("concurrency", ["1", "2"])
def test_ctrl_c_stops_an_eval_without_running_the_cases_not_started(support_rules: Path, tmp_path: Path,
                                                                    concurrency: str) -> None:
    """Ctrl-C waited for every case still queued to run (100 cases of 0.5 s: some 50 s, then `Aborted!`)."""
    dataset = _hang_dataset(tmp_path / "cases.yaml", range(1, 101))
    log = tmp_path / "runs.log"
    proc, err, took = _ctrl_c_during_eval(dataset, support_rules, "logging_slow_agent", log, "--concurrency",
                                          concurrency)
    assert proc.returncode != 0 and "Aborted" in err, err[-2000:]
    runs = len(log.read_text().splitlines())
    assert runs <= 2 * int(concurrency) + 1, f"{runs} runs after Ctrl-C, {took:.1f} s"


@pytest.mark.parametrize("timeout", [None, "20s"])
def test_ctrl_c_during_a_hung_run_exits_at_once_with_130(support_rules: Path, tmp_path: Path,
                                                         timeout: str | None) -> None:
    """Ctrl-C while an agent hangs printed `Aborted!`, then waited out the run's --timeout (18 s of 20) before it
    exited, and exited 1, the code of a failed gate. It exits at once, 130 (interrupted, as shells report it)."""
    dataset = _hang_dataset(tmp_path / "cases.yaml", range(1, 3))
    proc, err, took = _ctrl_c_during_eval(dataset, support_rules, "logging_hanging_agent", tmp_path / "runs.log",
                                          *(("--timeout", timeout) if timeout else ()))
    assert proc.returncode == 130 and "Aborted!" in err, (proc.returncode, err[-2000:])
    assert took < 5, f"exited {took:.1f} s after Ctrl-C"
    assert "Traceback" not in err, err[-2000:]


def _join_agent_threads() -> None:
    for t in threading.enumerate():
        if t.name == "toolwatch-agent":
            t.join(timeout=10)


def test_timed_out_cases_are_judged_on_the_calls_made_by_the_timeout(support_rules: Path, tmp_path: Path) -> None:
    from tests.monitor.offline.agents import HANG_RELEASE, mostly_hang

    dataset = _hang_dataset(tmp_path / "cases.yaml", range(1, 5))
    judge = Judge(load_dataset_rules(dataset, [support_rules]))
    HANG_RELEASE.clear()

    def on_run(run: RunResult) -> None:
        if run.case_id == "o4":  # the last: let every hung run make its late call and end before the eval collects
            HANG_RELEASE.set()
            _join_agent_threads()

    try:
        with Harness(agent_name="support") as h:
            result = run_eval(read_cases(dataset), mostly_hang, judge, h, timeout_s=0.5, on_run=on_run)
    finally:
        HANG_RELEASE.set()
    assert [t.passed for t in result.trials] == [True, False, False, False]
    for t in result.trials[1:]:
        assert t.run.timed_out and t.verdict is not None and t.verdict.judged
        assert [(c.name, c.outcome.value) for c in t.verdict.calls] == [("get_shipping_eta", "wrong_tool")]
        assert [m.tool for m in t.verdict.missed] == ["get_order_status"]
        assert t.reason.startswith("timed out after 0.5 s; ") and "get_shipping_eta" in t.reason


@pytest.mark.parametrize(("orders", "accuracy", "missed", "code"), [
    (range(1, 12), "Tool call accuracy: 1/11 (9.1%)", 10 / 11, 1),  # 10 of 11 cases time out: the gate fails
    (range(2, 12), "Tool call accuracy: 0/10 (0.0%)", 1.0, 2),  # every case times out: no run completed, exit 2
])
def test_cli_gates_count_the_cases_that_timed_out(support_rules: Path, tmp_path: Path, orders: range, accuracy: str,
                                                  missed: float, code: int) -> None:
    from tests.monitor.offline.agents import HANG_RELEASE

    dataset = _hang_dataset(tmp_path / "cases.yaml", orders)
    junit, js = tmp_path / "eval.xml", tmp_path / "eval.json"
    HANG_RELEASE.clear()
    try:
        res = CliRunner().invoke(eval_, [
            "--dataset", str(dataset), "--rules", str(support_rules), "--agent",
            "tests.monitor.offline.agents:mostly_hang", "--timeout", "0.5", "--concurrency", "11", "--no-progress",
            "--junit", str(junit), "--json", str(js), "--fail-under", "accuracy=0.95"])
    finally:
        HANG_RELEASE.set()
    assert res.exit_code == code, res.output
    assert accuracy in res.output and "All gates passed" not in res.output
    assert "FAILED 1 gate(s)" in res.output
    report = json.loads(js.read_text())
    assert report["counts"]["judged_turns"] == len(orders) and report["counts"]["wrong_tool"] == 10
    assert report["figures"]["missed_rate"] == pytest.approx(missed)
    assert report["figures"]["pass_rate"] == pytest.approx((len(orders) - 10) / len(orders))
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and suite.get("errors") == "10"
    errors = [c.find("error") for c in suite.findall("testcase") if c.find("error") is not None]
    assert all((e.get("message") or "").startswith("timed out after 0.5 s") for e in errors if e is not None)


def test_cli_captures_plain_opentelemetry_spans_of_an_application_that_set_the_sdk_provider(
    support_rules: Path, tmp_path: Path
) -> None:
    """The application set the SDK's TracerProvider as the global before toolwatch runs: its spans are captured too
    (and still reach the application's own exporter); a provider that is not the SDK's is named in a warning."""
    dataset = _hang_dataset(tmp_path / "cases.yaml", range(1, 4))
    args = ["eval", "--dataset", str(dataset), "--rules", str(support_rules), "--agent",
            "tests.monitor.offline.own_provider_agent:agent", "--no-progress", "-q"]
    res = _toolwatch(*args, "--fail-under", "e2e=1", cwd=tmp_path, env={"OWN_PROVIDER": "sdk"})
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Tool call accuracy: 3/3 (100.0%)" in res.stdout
    assert "application exporter: 6 spans" in res.stderr  # its invoke_agent and execute_tool span of each case
    assert "WARNING" not in res.stderr
    res = _toolwatch(*args, cwd=tmp_path, env={"OWN_PROVIDER": "custom"})
    assert "Tool call accuracy: 0/0 (absent)" in res.stdout  # none of the agent's own spans is seen
    (line,) = [ln for ln in res.stderr.splitlines() if "WARNING" in ln]
    assert "(CustomProvider) that is not the OpenTelemetry SDK's TracerProvider" in line
    assert "set an opentelemetry.sdk.trace.TracerProvider as the global provider" in line


def test_id_less_cases_of_one_input_are_judged_each_with_its_own_expectation(support_rules: Path,
                                                                             tmp_path: Path) -> None:
    from tests.monitor.offline.agents import support_agent

    dataset = tmp_path / "cases.yaml"
    dataset.write_text(
        "- id: '#2'\n  input: hello there\n  none: true\n"  # an id that looks like the key of the next case
        "- input: where is order 1\n  call: [{tool: get_order_status}]\n"
        "- input: where is order 1\n  call: [{tool: get_shipping_eta}]\n", encoding="utf-8")
    cases = read_cases(dataset)
    judge = Judge(load_dataset_rules(dataset, [support_rules]))
    with Harness(agent_name="support") as h:
        result = run_eval(cases, support_agent, judge, h)
    assert [t.verdict.rule if t.verdict else None for t in result.trials] == ["case:#2", "case:cases:2",
                                                                              "case:cases:3"]
    assert [t.passed for t in result.trials] == [True, True, False]
    assert "called get_order_status instead of get_shipping_eta" in result.trials[2].reason
    # the key each case's turn carries: its id, else its position (made unique against the ids)
    assert [(c.case_id, c.key) for c in cases] == [("#2", "#2"), (None, "#2.1"), (None, "#3")]


def test_a_case_id_like_a_position_is_not_merged_with_the_case_at_that_position(support_rules: Path,
                                                                                tmp_path: Path) -> None:
    """An explicit id `#2` and the id-less second case are two cases in pass^k and in the cases table."""
    from tests.monitor.offline.agents import support_agent

    dataset = tmp_path / "cases.yaml"
    dataset.write_text("- id: '#2'\n  input: hello there\n  none: true\n"
                       "- input: where is order 1\n  call: [{tool: get_shipping_eta}]\n", encoding="utf-8")
    cases = read_cases(dataset)
    judge = Judge(load_dataset_rules(dataset, [support_rules]))
    with Harness(agent_name="support") as h:
        result = run_eval(cases, support_agent, judge, h, trials=2)
    by_case = {name: [t.passed for t in ts] for name, ts in result.by_case().items()}
    assert by_case == {"#2": [True, True], "#2.1": [False, False]}
    assert result.pass_hat(2) == pytest.approx(0.5)  # merged: C(2,2)/C(4,2) = 1/6
    js = tmp_path / "eval.json"
    code, out = _eval("--dataset", str(dataset), "--rules", str(support_rules), "--agent",
                      "tests.monitor.offline.agents:support_agent", "--trials", "2", "--json", str(js))
    assert code == 0, out
    report = json.loads(js.read_text())
    assert report["figures"]["pass_hat_k"] == pytest.approx(0.5)
    (table,) = [t for t in report["tables"] if t["title"] == "Cases (worst first)"]
    assert [row[:2] for row in table["rows"]] == [["#2.1", "0/2"], ["#2", "2/2"]]


def test_a_sub_agent_turn_is_not_merged_into_the_run_and_eval_gives_what_replay_gives(
    support_rules: Path, tmp_path: Path
) -> None:
    """The agent opens a turn of another agent name (`history-bot`) inside its run: that turn's call is the
    sub-agent's, judged on its own by serve and replay, so eval does not count it in the run's turn either; nor
    when the run times out after the sub-agent's turn ended."""
    from tests.monitor.offline.agents import HANG_RELEASE, delegating_agent

    dataset = _hang_dataset(tmp_path / "cases.yaml", range(1, 3))
    judge = Judge(load_dataset_rules(dataset, [support_rules]))
    with Harness(agent_name="support") as h:
        result = run_eval(read_cases(dataset), delegating_agent, judge, h)
    assert [t.passed for t in result.trials] == [True, True], [t.reason for t in result.trials]
    assert [[c.name for c in t.verdict.calls] for t in result.trials if t.verdict] == [["get_order_status"]] * 2

    replayed: list[TurnVerdict] = []
    files = write_span_files(capture_spans(delegating_agent, ["where is order 1"]), tmp_path / "spans")
    replay_files(Replayer(judge, replayed.append), [files["jsonl"]])
    assert sorted((v.agent, [c.name for c in v.calls], v.end_to_end) for v in replayed) == [
        ("history-bot", ["get_order_history"], None), ("support", ["get_order_status"], True)]

    HANG_RELEASE.clear()
    try:
        with Harness(agent_name="support") as h:
            run = h.run(delegating_agent, "where is order 1, hang", case_id="o1", timeout_s=0.5)
            traced = [t for t in h.collect() if t.trace_id == run.trace_id]
    finally:
        HANG_RELEASE.set()
    assert run.timed_out and sorted(c.name for t in traced for c in t.calls) == ["get_order_history",
                                                                                  "get_order_status"]
    cut = run_turn(run, traced, "support")
    assert cut is not None and [c.name for c in cut.calls] == ["get_order_status"]


def test_a_timed_out_run_that_matched_no_expectation_says_so_after_the_timeout(support_rules: Path) -> None:
    from monitor.evaluate import Case
    from tests.monitor.offline.agents import HANG_RELEASE, mostly_hang

    HANG_RELEASE.clear()
    try:
        with Harness(agent_name="support") as h:  # the rules only: no case, and no rule matches the input
            result = run_eval([Case("z", "z", "zzz")], mostly_hang, Judge(load_rules([support_rules])), h,
                              timeout_s=0.3)
    finally:
        HANG_RELEASE.set()
    (trial,) = result.trials
    assert trial.run.timed_out and trial.verdict is not None and not trial.verdict.judged
    assert trial.reason == ("timed out after 0.3 s; no expectation matched the case (check its id or input "
                            "against the dataset)")



def test_a_run_that_raised_and_matched_no_expectation_says_it_raised(support_rules: Path) -> None:
    from monitor.evaluate import Case
    from tests.monitor.offline.agents import raising_agent

    with Harness(agent_name="support") as h:  # the rules only: no case, and no rule matches the input
        result = run_eval([Case("z", "z", "zzz")], raising_agent, Judge(load_rules([support_rules])), h, timeout_s=5)
    (trial,) = result.trials
    assert trial.run.error and trial.verdict is not None and not trial.verdict.judged
    assert trial.reason == ("agent raised RuntimeError: model backend down; no expectation matched the case (check "
                            "its id or input against the dataset)")


def test_a_timed_out_run_counts_no_call_ended_after_its_timeout_when_the_harness_gets_the_gil_back_late() -> None:
    """An agent holding the GIL (CPU work, a C extension) keeps the harness's thread from waking at the timeout: the
    calls it made meanwhile ended after the timeout and do not count, however late the harness notices."""
    import time

    from tests.monitor.offline.agents import EXECUTOR

    def busy(text: str) -> str:
        EXECUTOR.execute("get_shipping_eta", {"order_id": "1"})
        until = time.perf_counter() + 0.5
        while time.perf_counter() < until:  # the GIL is not handed over before the switch interval
            pass
        EXECUTOR.execute("get_order_status", {"order_id": "1"})  # 0.5 s in, past the 0.1 s timeout
        time.sleep(0.5)
        return "done"

    interval = sys.getswitchinterval()
    sys.setswitchinterval(5.0)
    try:
        with Harness(agent_name="support") as h:
            run = h.run_and_collect(busy, "where is order 1", timeout_s=0.1)
    finally:
        sys.setswitchinterval(interval)
    assert run.timed_out
    (turn,) = run.turns
    assert [c.name for c in turn.calls] == ["get_shipping_eta"]
    assert turn.end_ns == run.deadline_ns and turn.end_ns - turn.start_ns == 100_000_000

def test_agent_traceback_is_kept_bounded() -> None:
    from tests.monitor.offline.agents import deep_raising_agent

    with Harness(agent_name="support") as h:
        short = h.run(deep_raising_agent, "model backend down")
        long = h.run(deep_raising_agent, "x" * 20_000)
    tb = short.traceback or ""
    assert short.error == "ValueError: model backend down"
    assert tb.startswith("Traceback (most recent call last):") and tb.endswith("ValueError: model backend down\n")
    assert tb.count('  File "') == 20 and "in _pong" in tb and "_harness.py" not in tb
    assert long.traceback is not None and len(long.traceback) < 8192 + 40
    assert long.traceback.startswith("... (") and long.traceback.endswith("x" * 100 + "\n")


def _toolwatch(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The CLI in a fresh process (the global TracerProvider is unset there, as in a user's shell)."""
    code = "from monitor.cli import main; main()"
    env = {**os.environ, **(env or {}), "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120, check=False)


def test_cli_prints_the_agent_traceback_with_v_and_puts_it_in_junit(dataset: Path, support_rules: Path,
                                                                    tmp_path: Path) -> None:
    junit = tmp_path / "eval.xml"
    args = ["eval", "--dataset", str(dataset), "--rules", str(support_rules), "--agent",
            "tests.monitor.offline.agents:raising_agent", "--no-progress"]
    plain = _toolwatch(*args, cwd=tmp_path)
    assert plain.returncode == 2, plain.stderr  # every run raised: no run of the agent completed (test_eval_exit.py)
    assert "Traceback" not in plain.stdout + plain.stderr
    assert "3 run(s) raised or timed out; `toolwatch -v eval ...` prints the agent's traceback" in plain.stdout
    loud = _toolwatch("-v", *args, "-q", "--junit", str(junit), cwd=tmp_path)
    assert loud.returncode == 2, loud.stderr
    assert loud.stderr.count("Traceback (most recent call last):") == 3
    assert 'agents.py", line' in loud.stderr and "in raising_agent" in loud.stderr
    assert "RuntimeError: model backend down" in loud.stderr
    errors = [c.find("error") for c in ET.parse(junit).getroot().iter("testcase")]
    assert len(errors) == 3
    for e in errors:
        assert e is not None and "in raising_agent" in (e.text or "") and (e.text or "").rstrip().endswith(
            "RuntimeError: model backend down")


def test_cli_captures_an_agent_instrumented_with_plain_opentelemetry(support_rules: Path, tmp_path: Path) -> None:
    dataset = _hang_dataset(tmp_path / "cases.yaml", range(1, 4))
    agent = "tests.monitor.offline.agents:plain_otel_agent"
    res = _toolwatch("eval", "--dataset", str(dataset), "--rules", str(support_rules), "--agent", agent,
                     "--no-progress", "-q", "--fail-under", "e2e=1", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Tool call accuracy: 3/3 (100.0%)" in res.stdout
    res = _toolwatch("probe", "--generator", "tests.monitor.offline.agents:order_inputs", "--agent", agent,
                     "--rules", str(support_rules), "--iterations", "5", "--no-progress", "-q", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Tool call accuracy: 5/5 (100.0%)" in res.stdout


def test_an_agent_that_answers_nothing_or_raises_fails_the_response_checks(tmp_path: Path) -> None:
    """The case requires a final "Result: ..." line (as the triage rules do). A triage agent that makes the right
    call and then returns None, or raises, has given no answer: its response check fails (it passed end to end
    before)."""
    import instrumentation as tw
    from tests.monitor.offline.conftest import TRIAGE_RULES

    @tw.tool
    def pull_billing_telemetry(log_excerpt: str) -> dict[str, int]:
        """Billing telemetry."""
        return {"errors": 1}

    def silent(text: str) -> None:
        pull_billing_telemetry(log_excerpt=text)

    def raising(text: str) -> str:
        pull_billing_telemetry(log_excerpt=text)
        raise RuntimeError("no answer")

    def answering(text: str) -> str:
        pull_billing_telemetry(log_excerpt=text)
        return "Result: billing"

    dataset = tmp_path / "cases.yaml"
    dataset.write_text("- id: bill\n  input: '[BILL] charge failed'\n  call: [{tool: pull_billing_telemetry}]\n"
                       "  respond: [{regex: '(?m)^Result: \\S.*$'}]\n")
    judge = Judge(load_dataset_rules(dataset, [TRIAGE_RULES]))
    with Harness(agent_name="incident-triage") as h:
        outcomes = {}
        for agent in (silent, raising, answering):
            [trial] = run_eval(read_cases(dataset), agent, judge, h).trials
            assert trial.verdict is not None
            outcomes[agent.__name__] = (trial.verdict.response_ok, trial.verdict.selection_ok)
    assert outcomes == {"silent": (False, True), "raising": (False, True), "answering": (True, True)}


def _stray_counts(verdicts: list[TurnVerdict]) -> dict[str, int]:
    from monitor.report import ReportBuilder

    builder = ReportBuilder()
    for v in verdicts:
        builder.add(v)
    return builder.counts()


def test_calls_made_in_threads_without_the_context_are_judged_alone_as_replay_judges_them(
    dataset: Path, support_rules: Path, tmp_path: Path
) -> None:
    """An agent that runs its tools in plain threads: the calls have no turn (the threads do not carry the
    OpenTelemetry context), so the case misses its call, as in serve; but the calls are not lost: they are judged
    alone (turnless: catalog and schema checks, the made-up tool is hallucinated), exactly as replay judges them."""
    from tests.monitor.offline.agents import threaded_agent

    judge = Judge(load_dataset_rules(dataset, [support_rules]))
    with Harness(agent_name="support") as h:
        result = run_eval(read_cases(dataset)[:1], threaded_agent, judge, h)
    (trial,) = result.trials
    assert not trial.passed and "missed get_order_status" in trial.reason
    assert all(v.turnless for v in result.strays)
    assert sorted((c.name, c.outcome.value) for v in result.strays for c in v.calls) == [
        ("get_order_status", "unjudged"), ("lookup_order", "hallucinated")]

    replayed: list[TurnVerdict] = []
    files = write_span_files(capture_spans(threaded_agent, ["where is order 1"]), tmp_path / "spans")
    replay_files(Replayer(judge, replayed.append), [files["jsonl"]])
    evaluated = [*(t.verdict for t in result.trials if t.verdict is not None), *result.strays]
    assert _stray_counts(evaluated) == _stray_counts(replayed)


def test_cli_eval_reports_calls_made_outside_every_run(dataset: Path, support_rules: Path, tmp_path: Path) -> None:
    js = tmp_path / "eval.json"
    code, out = _eval("--dataset", str(dataset), "--rules", str(support_rules), "--agent",
                      "tests.monitor.offline.agents:threaded_agent", "--json", str(js))
    report = json.loads(js.read_text())
    counts = report["counts"]
    assert (counts["turnless_turns"], counts["all_calls"], counts["hallucinated"]) == (6, 6, 3), counts
    assert report["figures"]["hallucinated_rate"] == pytest.approx(0.5)
    assert any("6 tool call(s) ran outside every run" in n for n in report["notes"]), report["notes"]


def test_scenario_steps_report_calls_made_outside_their_turn(scenario_file: Path) -> None:
    from tests.monitor.offline.agents import threaded_agent

    sf = load_scenarios(scenario_file)
    with Harness(agent_name="support") as h:
        run = run_scenarios(sf, threaded_agent, build_judge(sf), h, mode="step")
    assert not run.steps[0].passed and "missed get_order_status" in run.steps[0].reason
    assert len(run.strays) == 6 and all(v.turnless for v in run.strays)
    assert sum(c.outcome.value == "hallucinated" for v in run.strays for c in v.calls) == 3


def test_an_agent_that_returns_no_text_fails_the_response_checks_and_the_report_says_why(
    support_rules: Path, tmp_path: Path
) -> None:
    """An agent that returns its answer in a dict gives no answer text: its response checks fail as for an agent
    that returns None (they were skipped, and the case passed end to end, with a response check it never met), and
    the report says what the agent returned."""
    from tests.monitor.offline.agents import dict_agent

    dataset = tmp_path / "cases.yaml"
    dataset.write_text("- id: o1\n  input: where is order 1\n  call: [{tool: get_order_status}]\n"
                       "  respond: [{contains: shipped}]\n- id: o2\n  input: where is order 2\n"
                       "  call: [{tool: get_order_status}]\n")
    judge = Judge(load_dataset_rules(dataset, [support_rules]))
    with Harness(agent_name="support") as h:
        result = run_eval(read_cases(dataset), dict_agent, judge, h)
    checked, unchecked = result.trials
    assert checked.verdict is not None and checked.verdict.response_ok is False and not checked.passed
    assert unchecked.passed  # no response check: the answer's type does not matter
    assert [t.run.answer_type for t in result.trials] == ["dict", "dict"]

    js = tmp_path / "eval.json"
    code, _ = _eval("--dataset", str(dataset), "--rules", str(support_rules), "--agent",
                    "tests.monitor.offline.agents:dict_agent", "--json", str(js))
    report = json.loads(js.read_text())
    assert report["figures"]["response_compliance"] == 0.0 and report["figures"]["pass_rate"] == 0.5
    assert any("2 run(s) returned a dict, not the answer text" in n for n in report["notes"]), report["notes"]


def test_an_agent_whose_own_rule_file_declares_no_tool_is_not_warned_of(tmp_path: Path) -> None:
    """A rule file scoped to an agent that calls no tool (its rules expect none) beside another agent's file: the
    warning said the files were scoped to the other agent "and none to 'helper'", and to give --agent-name, though
    the name was right and helper's own rules judge its turns."""
    from monitor.evaluate import agent_name_problem, load_judge

    helper = tmp_path / "helper.yaml"
    helper.write_text("version: 1\nagent: helper\nexpect:\n  - id: helper-greeting\n    when: {regex: '(?i)^hi'}\n"
                      "    none: true\n")
    judge = load_judge([REPO / "rules" / "travel.yaml", helper])
    assert agent_name_problem(judge, "helper") is None
    # Still warned of: a name no file is scoped to.
    assert "none to 'helpr'" in str(agent_name_problem(judge, "helpr"))


def _requested(name: str, call_id: str, start_ns: int, trace: str = "t" * 32) -> ToolCall:
    r = RequestedCall(name, call_id, "{}", trace_id=trace, span_id=f"{'c' * 16}#00", parent_span_id="c" * 16,
                      start_ns=start_ns, end_ns=start_ns)
    return r


@pytest.mark.parametrize("timed_out", [False, True])
def test_a_call_requested_in_the_run_and_run_in_another_turn_of_it_counts_once(timed_out: bool) -> None:
    """The run's turn holds a call its model requested (a chat span's tool_call part) that ran under another turn of
    the same agent in its trace (a framework's own invoke_agent span), or with no turn: the run is judged on one
    call, not on the requested call and the executed one."""
    trace = "t" * 32
    asked = _requested("get_order_status", "call_1", 10)
    executed = ToolCall("get_order_status", "call_1", '{"order_id": "1"}', trace_id=trace, span_id="e" * 16,
                        parent_span_id="f" * 16, start_ns=20, end_ns=30)
    other = ToolCall("lookup_order", "", "{}", trace_id=trace, span_id="d" * 16, start_ns=40, end_ns=50)
    own = Turn("where is order 1", (asked,), agent="support", trace_id=trace, span_id="a" * 16, start_ns=0,
               end_ns=100)
    inner = Turn("where is order 1", (executed,), agent="support", trace_id=trace, span_id="f" * 16, start_ns=5,
                 end_ns=90)
    stray = Turn("", (other,), trace_id=trace, turnless=True)
    run = RunResult("where is order 1", "o1", trace_id=trace, span_id="a" * 16, output="shipped")
    if timed_out:
        run.timed_out, run.deadline_ns, run.duration_s = True, 100, 1e-7
    turn = run_turn(run, [own, inner, stray], "support")
    assert turn is not None
    assert [(c.name, c.call_id, type(c).__name__) for c in turn.calls] == [
        ("get_order_status", "call_1", "ToolCall"), ("lookup_order", "", "ToolCall")]


@pytest.mark.parametrize("timed_out", [False, True])
def test_an_id_less_call_paired_in_its_own_turn_is_not_paired_again_across_the_runs_turns(timed_out: bool) -> None:
    """Each turn of the run's trace was reconciled at its release: an id-less executed call that paired there with its
    turn's request does not take another turn's request too. The run holds the call that ran and, besides, the call
    requested in its own turn that never ran (two calls, as serve counts them)."""
    trace = "t" * 32
    never_ran = _requested("get_order_status", "call_1", 10)
    ran = ToolCall("get_order_status", "", '{"order_id": "1"}', trace_id=trace, span_id="e" * 16,
                   parent_span_id="f" * 16, start_ns=20, end_ns=30)
    own = Turn("where is order 1", (never_ran,), agent="support", trace_id=trace, span_id="a" * 16, start_ns=0,
               end_ns=100)
    inner = Turn("where is order 1", (ran,), agent="support", trace_id=trace, span_id="f" * 16, start_ns=5,
                 end_ns=90)  # its own request (call_2) paired with `ran` at its release
    run = RunResult("where is order 1", "o1", trace_id=trace, span_id="a" * 16, output="shipped")
    if timed_out:
        run.timed_out, run.deadline_ns, run.duration_s = True, 100, 1e-7
    turn = run_turn(run, [own, inner], "support")
    assert turn is not None
    assert [(c.call_id, type(c).__name__) for c in turn.calls] == [("call_1", "RequestedCall"), ("", "ToolCall")]


OFFERED_RULES = """version: 1
agent: support
catalog: {from_definitions: true}
expect:
  - id: weather
    when: {regex: '(?i)weather'}
    call: [{tool: get_weather, exactly: 1}]
"""


@pytest.mark.parametrize("timed_out", [False, True])
def test_the_tools_offered_in_the_runs_inner_turns_and_before_its_timeout_join_its_turn(tmp_path: Path,
                                                                                        timed_out: bool) -> None:
    """With `from_definitions: true`, a call of a tool offered only inside a turn the agent opened itself under its
    own name (its calls are the run's), or offered before a timeout (the run's own turn never ended: its chat spans
    and calls came without it), is a call of an offered tool, as serve judges it, not of an unknown one. The run's own
    offers come first (the first definition of a name wins: get_weather needs a city, and the call gives a town)."""
    from monitor.evaluate import Case
    from tests.monitor.offline.agents import HANG_RELEASE, offering_agent

    rules = tmp_path / "offered.yaml"
    rules.write_text(OFFERED_RULES, encoding="utf-8")
    text = "weather in oslo, hang" if timed_out else "weather in oslo"
    HANG_RELEASE.clear()
    try:
        with Harness(agent_name="support") as h:
            result = run_eval([Case("w", "w", text)], offering_agent, Judge(load_rules([rules])), h,
                              timeout_s=0.5 if timed_out else None)
    finally:
        HANG_RELEASE.set()
        _join_agent_threads()
    (trial,) = result.trials
    assert trial.run.timed_out is timed_out and trial.verdict is not None and trial.verdict.judged
    assert [(c.name, c.outcome.value, c.in_catalog, c.schema_valid) for c in trial.verdict.calls] == [
        ("get_weather", "correct", True, False), ("get_time", "spurious", True, True),
        *([("get_time", "spurious", True, True)] if timed_out else [])]
    assert trial.verdict.missed == ()
    reason = "failed (weather): get_weather arguments invalid (required); extra call get_time"
    assert (trial.passed, trial.reason) == (
        (False, f"timed out after 0.5 s; {reason}; extra call get_time") if timed_out else (False, reason))


def test_agent_name_other_than_the_scenario_files_agent_is_a_usage_error() -> None:
    """`--agent-name other` beside a scenario file's `agent: incident-triage` named the turns `other`, while the
    steps' expectations stay the file agent's: every step failed ("the step's expectation did not match"), exit 0,
    and the warning said to give --agent-name, which was given. The conflict is refused, at the file's `agent`."""
    scenario = str(REPO / "examples" / "triage" / "scenario.yaml")
    code, out = _eval("--scenario", scenario, "--agent", "examples.triage.agent:triage", "--agent-name", "other")
    assert code == 2, out
    assert f"{scenario}:3:8: the scenario file's agent is 'incident-triage', --agent-name gives 'other'" in out, out
    code, out = _eval("--scenario", scenario, "--agent", "examples.triage.agent:triage", "--agent-name",
                      "incident-triage")
    assert code == 0 and "Tool call accuracy: 3/4" in out, out


@pytest.mark.parametrize("timeout_s", [None, 10.0])
def test_a_call_still_running_when_the_agent_returns_counts_for_its_run(support_rules: Path, timeout_s: float | None
                                                                        ) -> None:
    """README: tools run under copy_context().run count for their case. One still running when the agent returned
    was lost (the harness assembles with no grace): the run's turn ended before it."""
    from tests.monitor.offline.agents import detached_call_agent

    judge = Judge(load_rules([support_rules]))
    with Harness(agent_name="support") as h:
        run = h.run_and_collect(detached_call_agent, "where is order 1", timeout_s=timeout_s)
    assert [c.name for t in run.turns for c in t.calls] == ["get_order_status"]
    assert run.strays == []
    assert judge.judge(run.turns[0]).selection_ok


def test_calls_still_running_when_their_agents_return_count_under_concurrency(dataset: Path, support_rules: Path
                                                                              ) -> None:
    from tests.monitor.offline.agents import detached_call_agent

    judge = Judge(load_dataset_rules(dataset, [support_rules]))
    cases = [c for c in read_cases(dataset) if c.case_id != "hi"]
    with Harness(agent_name="support") as h:
        result = run_eval(cases, detached_call_agent, judge, h, trials=3, concurrency=4, timeout_s=10)
    calls = [c.name for t in result.trials for c in (t.verdict.calls if t.verdict else ())]
    assert calls == ["get_order_status"] * 6, [t.reason for t in result.trials]
    assert result.pass_rate == 1.0


def test_an_agent_that_returned_before_its_timeout_is_not_timed_out_by_a_call_it_left_running(support_rules: Path
                                                                                              ) -> None:
    """The wait for calls left running ends at the timeout; the run returned in time and is not a timed-out one."""
    from tests.monitor.offline.agents import detached_call_agent

    with Harness(agent_name="support") as h:
        started = time.monotonic()
        run = h.run_and_collect(detached_call_agent, "where is order 1", timeout_s=0.1)
        took = time.monotonic() - started
    assert not run.timed_out and run.error is None, run.error
    assert [c.name for t in run.turns for c in t.calls] == []  # it ended after the timeout: not the run's
    assert took < 0.2 + 0.5


def test_the_open_spans_the_harness_keeps_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    from monitor.evaluate import _harness

    monkeypatch.setattr(_harness, "MAX_OPEN_TRACES", 3)
    with Harness(agent_name="support") as h:
        tracer = h.provider.get_tracer("t")
        leaked = [tracer.start_span(f"execute_tool leak{i}") for i in range(5)]  # each its own trace, not ended
        assert len(h.processor._open) == 3
        for span in leaked:
            span.end()
        assert h.processor._open == {}


def test_a_run_whose_turn_opens_after_its_timeout_leaves_no_stray_calls(support_rules: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Under heavy load the agent's thread can open the run's turn only after the timeout: its trace was never
    recorded as a run's, and the calls the agent made later were judged alone as calls outside every run."""
    import contextlib
    from collections.abc import Iterator

    from instrumentation import agent_turn
    from monitor.evaluate import _harness
    from tests.monitor.offline.agents import support_agent

    @contextlib.contextmanager
    def late_turn(*args: Any, **kwargs: Any) -> Iterator[Any]:
        time.sleep(0.3)  # the thread is scheduled late
        with agent_turn(*args, **kwargs) as turn:
            yield turn

    def slow_agent(text: str) -> str:
        support_agent(text)
        time.sleep(1.5)  # still running when the harness collects
        return "done"

    monkeypatch.setattr(_harness, "agent_turn", late_turn)
    with Harness(agent_name="support") as h:
        run = h.run(slow_agent, "where is order 1", timeout_s=0.1)
        assert run.timed_out
        collected: list[Turn] = []
        deadline = time.monotonic() + 10
        while not any(t.calls for t in collected) and time.monotonic() < deadline:  # the agent goes on and calls
            time.sleep(0.05)
            collected += h.collect()
        assert [c.name for t in collected for c in t.calls] == ["get_order_status"]  # the check sees the call
        strays = h.stray_turns(collected)
    assert strays == []


def test_a_span_the_agent_left_open_that_is_no_tool_call_is_not_waited_for(support_rules: Path) -> None:
    """The wait for calls left running waited for every open span of the run's trace: an agent leaving a chat span
    open cost 2 s a run, unexplained."""
    from tests.monitor.offline.agents import support_agent

    with Harness(agent_name="support") as h:
        tracer = h.provider.get_tracer("llm")

        def leaky_agent(text: str) -> str:
            tracer.start_span("chat gpt-x", attributes={"gen_ai.operation.name": "chat"})  # never ended
            return support_agent(text)

        started = time.monotonic()
        for _ in range(3):
            run = h.run_and_collect(leaky_agent, "where is order 1", timeout_s=10)
            assert [c.name for t in run.turns for c in t.calls] == ["get_order_status"]
        assert time.monotonic() - started < 1.5


def test_a_call_still_running_past_the_wait_is_warned_of(support_rules: Path, caplog: pytest.LogCaptureFixture,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from monitor.evaluate import _harness
    from tests.monitor.offline.agents import detached_call_agent

    monkeypatch.setattr(_harness, "LATE_CALLS_S", 0.05)
    with Harness(agent_name="support") as h, caplog.at_level("WARNING", logger="monitor.evaluate._harness"):
        run = h.run_and_collect(detached_call_agent, "where is order 1", timeout_s=10)
    assert run.turns and not run.turns[0].calls
    assert any("still running" in r.getMessage() and "not counted" in r.getMessage() for r in caplog.records), \
        caplog.text


LATE_NOTE = "1 tool call(s) ended after their run's timeout"


def test_a_call_made_after_its_runs_timeout_counts_for_no_case_and_the_report_says_so(support_rules: Path,
                                                                                       tmp_path: Path) -> None:
    """A sync agent's thread cannot be stopped: the call its run makes after the timeout counts for no case (not
    for its own, judged on the calls made by then, nor for the case running when it ends), and is not lost silently:
    the report says how many such calls there were."""
    from tests.monitor.offline.agents import HANG_RELEASE, reset_late

    dataset = _hang_dataset(tmp_path / "cases.yaml", range(1, 4))
    js = tmp_path / "eval.json"
    reset_late([])
    try:
        code, out = _eval("--dataset", str(dataset), "--rules", str(support_rules), "--agent",
                          "tests.monitor.offline.agents:late_caller", "--timeout", "0.5", "--json", str(js))
    finally:
        HANG_RELEASE.set()
    report = json.loads(js.read_text())
    by_case = {c["name"]: c for c in report["cases"]}
    assert by_case["o2"]["status"] == "error" and "calls: (none)" in by_case["o2"]["detail"], by_case["o2"]
    assert by_case["o3"]["detail"].count("get_order_status") == 1, by_case["o3"]  # its own call only
    assert report["counts"]["all_calls"] == 2
    assert any(n.startswith(LATE_NOTE) for n in report["notes"]), report["notes"]


def test_scenario_steps_report_a_call_made_after_its_steps_timeout(scenario_file: Path, tmp_path: Path) -> None:
    from tests.monitor.offline.agents import HANG_RELEASE, reset_late

    scenario_file.write_text("""
agent: support
rules: [support.yaml]
scenarios:
  - name: late
    steps:
      - user: where is order 2
        expect: {calls: [{tool: get_order_status}]}
      - user: where is order 3
        expect: {calls: [{tool: get_order_status}]}
""", encoding="utf-8")
    js = tmp_path / "eval.json"
    reset_late([])
    try:
        code, out = _eval("--scenario", str(scenario_file), "--agent", "tests.monitor.offline.agents:late_caller",
                          "--timeout", "0.5", "--json", str(js))
    finally:
        HANG_RELEASE.set()
    report = json.loads(js.read_text())
    assert report["counts"]["all_calls"] == 1, report["counts"]
    assert any(n.startswith("1 tool call(s) ended after their step's timeout") for n in report["notes"]), \
        report["notes"]


def test_the_report_says_a_timed_out_run_is_still_running_at_the_end(support_rules: Path, tmp_path: Path) -> None:
    """What a hung run calls after the eval has collected is not seen: the report says such runs are left."""
    from tests.monitor.offline.agents import HANG_RELEASE

    dataset = _hang_dataset(tmp_path / "cases.yaml", range(1, 3))
    js = tmp_path / "eval.json"
    HANG_RELEASE.clear()
    try:
        _eval("--dataset", str(dataset), "--rules", str(support_rules), "--agent",
              "tests.monitor.offline.agents:mostly_hang", "--timeout", "0.3", "--json", str(js))
    finally:
        HANG_RELEASE.set()
    notes = json.loads(js.read_text())["notes"]
    assert any(n.startswith("1 timed-out run(s) still running at the end") for n in notes), notes
