"""Scenario files: what a step without `calls` expects, load-time checks with file:line, and errors of a step
(an unknown tool, a bad check) named at their place in the scenario file, never in a temporary file."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from monitor.cli.eval_cmd import eval_
from monitor.evaluate import Harness, load_callable
from monitor.scenario import ScenarioError, build_judge, load_and_build, load_scenarios, run_scenarios, step_case
from monitor.verdict import Outcome
from tests.monitor.offline.agents import memory_agent
from tests.monitor.offline.conftest import TRIAGE_RULES

FREE_STEPS = """
agent: support
rules: [support.yaml]
steps:
  - user: where is order 1          # calls get_order_status: any call will do
    expect: {tool_calls: {min: 1}}
  - user: where is order 2          # response checks alone
    expect: {response: {contains: shipped}}
  - user: thanks!                   # no call, one wanted
    expect: {tool_calls: {min: 1}}
  - user: where is order 3          # a call, none allowed by the count
    expect: {tool_calls: {max: 0}}
  - user: thanks!
    expect: {none: true}
  - user: where is order 4          # `calls: []` is `none: true`
    expect: {calls: []}
"""


def _write(tmp_path: Path, text: str, support_rules: Path | None = None, name: str = "s.yaml") -> Path:
    if support_rules is not None:
        (tmp_path / "support.yaml").write_text(support_rules.read_text())
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def test_a_step_without_calls_checks_only_its_counts_and_response(tmp_path: Path, support_rules: Path) -> None:
    sf = load_scenarios(_write(tmp_path, FREE_STEPS, support_rules))
    assert [s.any_calls for s in sf.scenarios[0].steps] == [True, True, True, True, False, False]
    with Harness(agent_name="support") as h:
        run = run_scenarios(sf, memory_agent, build_judge(sf), h)
    assert [s.passed for s in run.steps] == [True, True, False, False, True, False], [s.reason for s in run.steps]
    first = run.steps[0]
    assert first.verdict is not None and [c.outcome for c in first.verdict.calls] == [Outcome.CORRECT]
    assert "0 tool call(s), expected between 1 and any" in run.steps[2].reason
    assert run.steps[2].verdict is not None and run.steps[2].verdict.end_to_end is True  # only the count failed
    assert "1 tool call(s), expected between 0 and 0" in run.steps[3].reason
    assert "extra call get_order_status" in run.steps[5].reason


def test_a_step_without_calls_still_fails_a_made_up_tool(tmp_path: Path) -> None:
    p = _write(tmp_path, f"agent: incident-triage\nrules: ['{TRIAGE_RULES}']\nsteps:\n"
                         "  - user: '[AUTH] CRIT SEV1 authd: token refresh failed'\n"
                         "    expect: {tool_calls: {min: 1}}\n")
    sf = load_scenarios(p)
    triage = load_callable("examples.triage.agent:triage")
    with Harness(agent_name="incident-triage") as h:
        (result,) = run_scenarios(sf, triage, build_judge(sf), h).steps
    assert result.count_ok and not result.passed and "page_oncall" in result.reason
    assert result.verdict is not None
    assert [c.outcome for c in result.verdict.calls] == [Outcome.CORRECT, Outcome.HALLUCINATED]


TWO_STEPS = "rules: [support.yaml]\nsteps:\n  - user: hi\n  - user: where is order 1\n    expect: {expect}\n"


@pytest.mark.parametrize(("expect", "message"), [
    ("{none: true, calls: [{tool: get_order_status}]}", r":5:14: scenario-1, step 2: `none: true` expects no call"),
    ("{tool_calls: {min: 2, max: 1}}", r":5:32: scenario-1, step 2: tool_calls min 2 is greater than max 1"),
    ("{calls: [{tool: get_order_status, min: 3, max: 2}]}",
     r":5:52: scenario-1, step 2, call 1: min 3 is greater than max 2"),
    ("{none: true, tool_calls: {min: 1}}", r":5:44: scenario-1, step 2: the step expects no call, and tool_calls min"),
    ("{calls: [], none: false}", r":5:25: scenario-1, step 2: `calls: \[\]` expects no call"),
    ("{calls: [{tool: get_order_status, optional: true, exactly: 1}]}",
     r":5:47: scenario-1, step 2, call 1: an optional call has no minimum"),
    ("{calls: [{tool: get_order_status, optional: true, min: 2}]}",
     r":5:47: scenario-1, step 2, call 1: an optional call has no minimum, and `min: 2` asks for at least 2 calls"),
    # a slot counts calls that are made (rule files: exactly/max >= 1); one the step must not make is left out of
    # `calls`, where any call not listed fails the step: `exactly: 0` / `max: 0` are load errors, optional or not
    ("{calls: [{tool: get_order_status, optional: true, exactly: 0}]}",
     r":5:63: scenario-1, step 2, call 1: `exactly: 0` expects no call of get_order_status: leave it out of `calls` "
     r"\(a call not listed there fails the step\)"),
    ("{calls: [{tool: get_order_status, exactly: 0}]}",
     r":5:47: scenario-1, step 2, call 1: `exactly: 0` expects no call of get_order_status: leave it out"),
    ("{calls: [{tool: get_order_status, optional: true, max: 0}]}",
     r":5:63: scenario-1, step 2, call 1: `max: 0` expects no call of get_order_status: leave it out"),
    ("{calls: [{tool: get_shipping_eta}, {tool: get_order_status, max: 0}]}",
     r":5:73: scenario-1, step 2, call 2: `max: 0` expects no call of get_order_status: leave it out"),
    ("{tool_calls: {max: -1}}", r":5:32: scenario-1, step 2: tool_calls `max` is a non-negative integer"),
    ("{none: 1}", r":5:20: scenario-1, step 2: `none` is true or false"),
])
def test_contradictions_are_load_errors_with_file_and_line(tmp_path: Path, expect: str, message: str) -> None:
    p = _write(tmp_path, TWO_STEPS.format(expect=expect))
    with pytest.raises(ScenarioError, match=re.escape(str(p)) + message):
        load_scenarios(p)


@pytest.mark.parametrize(("expect", "message"), [
    ("{calls: [{tool: get_order_status}], tool_calls: {max: 0}}",
     r":5:67: scenario-1, step 2: the step's calls need at least 1 call, and tool_calls max is 0"),
    ("{calls: [{tool: get_order_status, min: 2}, {tool: get_shipping_eta}], tool_calls: {max: 2}}",
     r":5:101: scenario-1, step 2: the step's calls need at least 3 calls, and tool_calls max is 2"),
    ("{calls: [{tool: get_order_status}, {tool: get_shipping_eta, optional: true}], tool_calls: {min: 3}}",
     r":5:109: scenario-1, step 2: the step's calls allow at most 2 calls, and tool_calls min is 3"),
])
def test_count_bounds_no_run_can_meet_with_the_steps_calls_are_load_errors(tmp_path: Path, expect: str,
                                                                            message: str) -> None:
    """A step whose calls need more calls than its tool_calls max, or allow fewer than its min (any call past the
    slots' maximums is extra, and fails the step), can never pass: refused at load, as `none: true` with a min is."""
    p = _write(tmp_path, TWO_STEPS.format(expect=expect))
    with pytest.raises(ScenarioError, match=re.escape(str(p)) + message):
        load_scenarios(p)


@pytest.mark.parametrize("expect", [
    "{calls: [{tool: get_order_status}], tool_calls: {min: 1, max: 1}}",  # both bounds met exactly
    "{calls: [{tool: get_order_status, optional: true}], tool_calls: {min: 0, max: 0}}",  # the optional call unmade
    "{calls: [{tool: get_order_status, min: 1}], tool_calls: {min: 5}}",  # min alone: no upper bound
    "{calls: [{tool: get_order_status, max: 3}], tool_calls: {max: 0}}",  # max alone: min 0
    "{tool_calls: {min: 4, max: 4}}",  # no calls: any catalog tool, any number of times
])
def test_count_bounds_a_run_can_meet_load(tmp_path: Path, expect: str) -> None:
    p = _write(tmp_path, TWO_STEPS.format(expect=expect))
    assert load_scenarios(p).scenarios[0].steps[1].path


UNKNOWN_TOOL = """
agent: support
rules: [support.yaml]
scenarios:
  - name: order-then-eta
    steps:
      - user: where is order 1
        expect:
          calls: [{tool: get_order_status}]
      - user: when will it arrive?
        expect:
          calls:
            - tool: get_shipping_eta
            - tool: get_order_statuz
"""


def test_an_unknown_tool_is_named_in_the_scenario_file_with_a_fitting_hint(tmp_path: Path,
                                                                           support_rules: Path) -> None:
    p = _write(tmp_path, UNKNOWN_TOOL, support_rules, "sc2.yaml")
    args = ["--scenario", str(p), "--agent", "tests.monitor.offline.agents:memory_agent", "--no-progress"]
    res = CliRunner().invoke(eval_, args)
    assert res.exit_code == 2
    assert f"error: {p}:14:21: order-then-eta, step 2, call 2: unknown tool 'get_order_statuz'" in res.output
    assert "cases.jsonl" not in res.output and "toolwatch-scenario-" not in res.output
    hint = f"hint: fix the tool name, or declare the tool in the catalog of {tmp_path / 'support.yaml'}"
    assert hint in res.output and "--rules FILE" not in res.output

    no_rules = _write(tmp_path, UNKNOWN_TOOL.replace("rules: [support.yaml]\n", ""), None, "sc3.yaml")
    res = CliRunner().invoke(eval_, ["--scenario", str(no_rules), *args[2:]])
    assert res.exit_code == 2
    assert f"error: {no_rules}:8:26: order-then-eta, step 1, call 1: unknown tool 'get_order_status'" in res.output
    assert "hint: name the rule file with the tool catalog: `rules: [FILE]` in the scenario file, or --rules FILE" \
        in res.output
    res = CliRunner().invoke(eval_, ["--scenario", str(no_rules), *args[2:], "--rules", str(support_rules)])
    assert res.exit_code == 2 and f"{no_rules}:13:21: order-then-eta, step 2, call 2" in res.output


@pytest.mark.parametrize(("expect", "where", "message"), [
    ("{calls: [{tool: get_order_status, args: {order_id: {regex: '('}}}]}", ":5:72: scenario-1, step 2, call 1:",
     "missing )"),
    ("{calls: [{tool: get_order_status, args: {order_id: {fuzzy: 'x', exact: 'x'}}}]}",
     ":5:64: scenario-1, step 2, call 1:", "exactly one of"),
    ("{response: {contains: [a, b], regex: ['ok', '(']}}", ":5:57: scenario-1, step 2:", "missing )"),
])
def test_a_bad_check_of_a_step_is_named_in_the_scenario_file(tmp_path: Path, support_rules: Path, expect: str,
                                                             where: str, message: str) -> None:
    p = _write(tmp_path, TWO_STEPS.format(expect=expect), support_rules)
    sf = load_scenarios(p)
    with pytest.raises(ScenarioError) as info:
        build_judge(sf)
    assert str(info.value).startswith(f"{p}{where}") and message in str(info.value), str(info.value)


def test_a_scenario_file_that_is_not_utf8_or_too_large_is_a_located_error(tmp_path: Path) -> None:
    """The scenario file was read with Path.read_text: a Latin-1 byte raised UnicodeDecodeError (a traceback, exit 1),
    and no size bound applied. It is read as rule and dataset files are."""
    from monitor.rules._read import MAX_FILE_BYTES

    p = tmp_path / "latin1.yaml"
    p.write_bytes(b'scenarios:\n  - name: a\n    steps:\n      - user: "caf\xe9"\n')
    with pytest.raises(ScenarioError, match=re.escape(f"{p}:4:19: not UTF-8: byte(s) 0xe9")):
        load_scenarios(p)
    res = CliRunner().invoke(eval_, ["--scenario", str(p), "--agent", "tests.monitor.offline.agents:memory_agent",
                                     "--no-progress"])
    assert res.exit_code == 2 and f"error: {p}:4:19: not UTF-8" in res.output, res.output
    big = tmp_path / "big.yaml"
    with big.open("wb") as fh:
        fh.truncate(MAX_FILE_BYTES + 1)
    with pytest.raises(ScenarioError, match=re.escape(f"{big}: file too large ({MAX_FILE_BYTES + 1} bytes")):
        load_scenarios(big)


def test_steps_that_expand_past_the_cases_bound_are_named_in_the_scenario_file(tmp_path: Path) -> None:
    """A step without `calls` expects any catalog tool: its case lists every one. 10,000 such steps and a catalog
    of 1,000 tools (a 200 KB input) built 330 MB of cases in memory (1 GB, 20 s), then failed on the size of the
    generated file, named in a temporary directory at the scenario's `agent` key. The cases are written step by
    step within the cases-file bound, and the step that goes past it is named, with what to do."""
    from monitor.rules._read import MAX_FILE_BYTES

    (tmp_path / "tools.yaml").write_text("version: 1\ncatalog:\n  tools:\n"
                                         + "".join(f"    - name: tool_{i:04d}\n" for i in range(1000)))
    p = tmp_path / "any.yaml"
    p.write_text("rules: [tools.yaml]\nsteps:\n" + "".join(f"  - user: hi {i}\n" for i in range(1200)))
    sf = load_scenarios(p)
    step_bytes = len(json.dumps(step_case(sf.scenarios[0], sf.scenarios[0].steps[0], [f"tool_{i:04d}" for i in
                                                                                      range(1000)]))) + 1
    first_over = MAX_FILE_BYTES // step_bytes + 1  # steps are the same size, within a few bytes
    res = CliRunner().invoke(eval_, ["--scenario", str(p), "--agent", "tests.monitor.offline.agents:memory_agent",
                                     "--no-progress"])
    assert res.exit_code == 2, res.output
    assert "toolwatch-scenario-" not in res.output and "cases.jsonl" not in res.output
    m = re.search(rf"error: {re.escape(str(p))}:(\d+):5: scenario-1, step (\d+): the steps up to here make more "
                  rf"than {MAX_FILE_BYTES:,} bytes of expectations", res.output)
    assert m is not None, res.output
    assert abs(int(m[2]) - first_over) <= 1 and int(m[1]) == int(m[2]) + 2
    assert ("hint: a step without `calls` expects any of the 1000 catalog tools, and its case lists each (1200 such "
            "steps): give such steps `calls`, or split the scenarios into several files") in res.output


ONE_STEP = "steps: [{user: hi}]\n"


@pytest.mark.parametrize(("text", "message"), [
    ("agent: 5\n" + ONE_STEP, r":1:8: `agent` is the turns' agent name (gen_ai.agent.name), a non-empty string, got 5"),
    ("agent: ''\n" + ONE_STEP, r":1:8: `agent` is the turns' agent name"),
    ("agent: [support]\n" + ONE_STEP, r":1:8: `agent` is the turns' agent name"),
    ("agent: false\n" + ONE_STEP, r":1:8: `agent` is the turns' agent name (gen_ai.agent.name), a non-empty string, "
                                  r"got False"),
    ("rules: 0\n" + ONE_STEP, r":1:8: `rules` is a path or a list of paths (relative to this file), got 0"),
    ("rules: false\n" + ONE_STEP, r":1:8: `rules` is a path or a list of paths"),
    ("rules: ''\n" + ONE_STEP, r":1:8: `rules` is a path or a list of paths"),
    ("rules: {}\n" + ONE_STEP, r":1:8: `rules` is a path or a list of paths"),
    ("rules: [a.yaml, '']\n" + ONE_STEP,
     r":1:17: `rules` is a path or a list of paths (relative to this file), got ''"),
    ("rules: [a.yaml, 3]\n" + ONE_STEP, r":1:17: `rules` is a path or a list of paths"),
    ("name: 0\n" + ONE_STEP, r":1:7: scenario 1: `name` is a non-empty string, got 0"),
    ("name: ''\n" + ONE_STEP, r":1:7: scenario 1: `name` is a non-empty string, got ''"),
    ("name: []\n" + ONE_STEP, r":1:7: scenario 1: `name` is a non-empty string"),
    ("scenarios:\n  - name: a\n    steps: [{user: hi}]\n  - name: false\n    steps: [{user: hi}]\n",
     r":4:11: scenario 2: `name` is a non-empty string, got False"),
    ("agnet: support\n" + ONE_STEP, r":1:1: unknown key 'agnet' (allowed: agent, name, rules, steps)"),
    ("rule: [a.yaml]\nscenarios: [{steps: [{user: hi}]}]\n",
     r":1:1: unknown key 'rule' (allowed: agent, rules, scenarios)"),
    ("scenarios:\n  - name: a\n    description: x\n    steps: [{user: hi}]\n",
     r":3:5: scenario 1: unknown key 'description' (allowed: name, steps)"),
    ("steps: [{user: hi, expect: 0}]\n", ":1:28: scenario-1, step 1: `expect` is a mapping, got 0"),
    ("steps: [{user: hi, expect: ''}]\n", ":1:28: scenario-1, step 1: `expect` is a mapping, got ''"),
    ("steps: [{user: hi, expect: {calls: false}}]\n", ":1:36: scenario-1, step 1: `expect.calls` is a list, got False"),
    ("steps: [{user: hi, expect: {calls: {}}}]\n", ":1:36: scenario-1, step 1: `expect.calls` is a list, got {}"),
    ("steps: [{user: hi, expect: {response: []}}]\n",
     ":1:39: scenario-1, step 1: `expect.response` is a mapping, got []"),
    ("scenarios: [{steps: [{user: hi}]}]\n" + ONE_STEP,
     r":2:1: `steps` beside `scenarios`: give the scenarios in `scenarios: [...]`, or one scenario's `name` and "
     r"`steps` at the top level"),
])
def test_wrong_types_and_unknown_keys_are_load_errors_with_file_and_line(
        tmp_path: Path, text: str, message: str) -> None:
    """`agent: 5` (and other wrong types of the top-level keys, or falsy ones: `rules: 0`, `name: ''`, `expect: 0`,
    `calls: false`) were silently ignored, as were unknown top-level and scenario keys (a misspelt `rules` loaded no
    rule file)."""
    p = _write(tmp_path, text)
    with pytest.raises(ScenarioError, match=re.escape(str(p) + message)):
        load_scenarios(p)


@pytest.mark.parametrize("text", [
    "agent: null\nrules: null\nname: null\n" + ONE_STEP,
    "agent:\nrules: []\n" + ONE_STEP,
    "agent: support\nrules: support.yaml\nname: greet\n" + ONE_STEP,
    "agent: support\nrules: [support.yaml]\nscenarios: [{name: greet, steps: [{user: hi}]}, {steps: [{user: yo}]}]\n",
    "steps: [{user: hi, expect: null}, {user: yo, expect: {calls: null, response: null}}]\n",
])
def test_null_top_level_keys_are_left_out(tmp_path: Path, text: str) -> None:
    sf = load_scenarios(_write(tmp_path, text))
    assert sf.agent in (None, "support") and sf.rules in ([], [tmp_path / "support.yaml"])
    assert sf.scenarios[0].name in ("scenario-1", "greet")


@pytest.mark.parametrize("timeout_s", [None, 10.0])
def test_a_step_whose_agent_calls_sys_exit_fails_and_the_next_step_still_runs(tmp_path: Path, support_rules: Path,
                                                                               timeout_s: float | None) -> None:
    """SystemExit is no Exception: the step it ends fails as one that raised (its call was right), in both modes,
    and the scenario goes on."""
    from tests.monitor.offline.agents import exiting_agent

    sf = load_scenarios(_write(tmp_path, "agent: support\nrules: [support.yaml]\nsteps:\n"
                                         "  - {user: where is order 1, expect: {calls: [{tool: get_order_status}]}}\n"
                                         "  - {user: where is order 2, expect: {calls: [{tool: get_order_status}]}}\n",
                               support_rules))
    for mode in ("free", "step"):
        with Harness(agent_name="support") as h:
            run = run_scenarios(sf, exiting_agent, build_judge(sf), h, mode=mode, timeout_s=timeout_s)
        assert [s.passed for s in run.steps] == [False, False], mode
        for s in run.steps:
            assert "agent raised SystemExit: 3" in s.reason, s.reason
            assert s.verdict is not None and [c.outcome for c in s.verdict.calls] == [Outcome.CORRECT]


MANY_ERRORS = """
rules: [support.yaml]
scenarios:
  - name: one
    steps:
      - user: where is order 1
        expect: {calls: [{tool: get_order_status}], colour: red}
      - user: where is order 2
        expect: {calls: [{tool: get_order_status}]}
      - user: 5
  - name: two
    steps:
      - user: where is order 3
        expect: {tool_calls: {min: 3, max: 1}}
"""

MANY_BAD_CHECKS = """
rules: [support.yaml]
scenarios:
  - name: one
    steps:
      - user: where is order 1
        expect: {calls: [{tool: get_order_statuz}]}
      - user: where is order 2
        expect: {calls: [{tool: get_order_status}]}
  - name: two
    steps:
      - user: where is order 3
        expect: {calls: [{tool: get_order_status, args: {order_id: {regex: '('}}}]}
      - user: where is order 4
        expect: {calls: [{tool: lookup}]}
"""


def test_every_bad_step_of_a_scenario_file_is_reported_at_once(tmp_path: Path, support_rules: Path) -> None:
    """A scenario file's errors, and the errors of its steps' checks, came one at a time: the first only."""
    p = _write(tmp_path, MANY_ERRORS, support_rules)
    with pytest.raises(ScenarioError) as info:
        load_scenarios(p)
    lines = str(info.value).splitlines()
    assert len(lines) == 3, lines
    assert lines[0].startswith(f"{p}:7:53: one, step 1: unknown key 'colour'"), lines
    assert lines[1] == f"{p}:10:15: one, step 3: user: expected a string, got 5", lines
    assert lines[2] == f"{p}:14:36: two, step 1: tool_calls min 3 is greater than max 1", lines

    p = _write(tmp_path, MANY_BAD_CHECKS, support_rules, "checks.yaml")
    args = ["--scenario", str(p), "--agent", "tests.monitor.offline.agents:memory_agent", "--no-progress"]
    res = CliRunner().invoke(eval_, args)
    assert res.exit_code == 2, res.output
    assert f"error: {p}:7:33: one, step 1, call 1: unknown tool 'get_order_statuz'" in res.output, res.output
    assert f"{p}:13:76: two, step 1, call 1: invalid regular expression" in res.output, res.output
    assert f"{p}:15:33: two, step 2, call 1: unknown tool 'lookup'" in res.output, res.output
    assert res.output.count("hint: fix the tool name") == 1, res.output


MIXED_ERRORS = """
rules: [support.yaml]
scenarios:
  - name: one
    steps:
      - user: where is order 1
        expect: {calls: [{tool: get_order_statuz}]}
      - user: where is order 2
        expect: {calls: [{tool: get_order_status}], tool_calls: {min: 3, max: 1}}
  - name: two
    steps:
      - user: where is order 3
        expect: {calls: [{tool: lookup}]}
      - user: 5
"""


def test_a_structural_error_and_an_unknown_tool_in_other_steps_are_reported_at_once(tmp_path: Path,
                                                                                     support_rules: Path) -> None:
    """The catalog is checked on the steps that loaded even when others did not: every step in error, in file order,
    with the hint of the unknown tools once."""
    p = _write(tmp_path, MIXED_ERRORS, support_rules)
    known = "not in the catalog (known: get_order_history, get_order_status, get_shipping_eta)"
    expected = [
        f"{p}:7:33: one, step 1, call 1: unknown tool 'get_order_statuz': {known}",
        f"{p}:9:71: one, step 2: tool_calls min 3 is greater than max 1",
        f"{p}:13:33: two, step 1, call 1: unknown tool 'lookup': {known}",
        f"{p}:14:15: two, step 2: user: expected a string, got 5",
    ]
    with pytest.raises(ScenarioError) as info:
        load_and_build(p)
    assert str(info.value).splitlines() == expected
    assert info.value.hint == f"fix the tool name, or declare the tool in the catalog of {tmp_path / 'support.yaml'}"

    args = ["--scenario", str(p), "--agent", "tests.monitor.offline.agents:memory_agent", "--no-progress"]
    res = CliRunner().invoke(eval_, args)
    assert res.exit_code == 2, res.output
    assert res.output.splitlines() == [f"error: {expected[0]}", *expected[1:], f"hint: {info.value.hint}"]

    with pytest.raises(ScenarioError) as info:  # load_scenarios alone: the file's own errors
        load_scenarios(p)
    assert str(info.value).splitlines() == [expected[1], expected[3]]


def test_a_missing_scenario_dataset_or_rule_file_is_named_without_a_line_and_column(tmp_path: Path,
                                                                                    support_rules: Path) -> None:
    """`FILE:0:0: cannot read` named a place that is none: a file that cannot be read is named alone."""
    agent = ["--agent", "tests.monitor.offline.agents:memory_agent", "--no-progress"]
    gone = tmp_path / "gone.yaml"
    res = CliRunner().invoke(eval_, ["--scenario", str(gone), *agent])
    assert res.exit_code == 2 and res.output == f"error: {gone}: cannot read: No such file or directory\n", res.output
    p = _write(tmp_path, "rules: [nope.yaml]\nsteps: [{user: hi}]\n")
    res = CliRunner().invoke(eval_, ["--scenario", str(p), *agent])
    nope = tmp_path / "nope.yaml"  # a rule file the scenario file names: at its name there (the rest of the test)
    assert res.exit_code == 2, res.output
    assert res.output == f"error: {p}:1:9: rules: {nope}: cannot read: No such file or directory\n", res.output
    res = CliRunner().invoke(eval_, ["--dataset", str(gone), "--rules", str(support_rules), "--agent",
                                     "tests.monitor.offline.agents:support_agent", "--no-progress"])
    assert res.exit_code == 2 and f"{gone}: cannot read: No such file or directory\n" in res.output, res.output
    assert ":0:0" not in res.output


def test_a_rule_file_the_scenario_file_names_that_does_not_read_is_an_error_at_its_name(tmp_path: Path,
                                                                                       support_rules: Path) -> None:
    """`rules: /nonexistent.yaml` said `error: /nonexistent.yaml: cannot read` with no place in the scenario file that
    names it; now it is an error at that name, with the steps' errors (one line each, in file order)."""
    agent = ["--agent", "tests.monitor.offline.agents:memory_agent", "--no-progress"]
    gone = tmp_path / "nonexistent.yaml"
    p = _write(tmp_path, f"agent: support\nrules: {gone}\nsteps:\n  - user: hi\n")
    res = CliRunner().invoke(eval_, ["--scenario", str(p), *agent])
    assert res.exit_code == 2, res.output
    assert res.output == f"error: {p}:2:8: rules: {gone}: cannot read: No such file or directory\n", res.output

    p = _write(tmp_path, "agent: support\nrules: [support.yaml, gone.yaml]\nsteps:\n  - user: 5\n  - user: hi\n",
               support_rules)
    res = CliRunner().invoke(eval_, ["--scenario", str(p), *agent])
    assert res.exit_code == 2, res.output
    assert res.output.splitlines() == [
        f"error: {p}:2:23: rules: {tmp_path / 'gone.yaml'}: cannot read: No such file or directory",
        f"{p}:4:11: scenario-1, step 1: user: expected a string, got 5",
    ], res.output
    res = CliRunner().invoke(eval_, ["--scenario", str(p), "--rules", str(gone), *agent])  # not the file's: no place
    assert res.exit_code == 2, res.output
    assert f"error: {gone}: cannot read: No such file or directory\n" in res.output, res.output


@pytest.mark.parametrize("user, shown", [("5", "5"), ("[hi]", "['hi']"), ("{a: 1}", "{'a': 1}"), ("true", "True")])
def test_a_user_message_of_the_wrong_type_is_an_error_at_the_value(tmp_path: Path, support_rules: Path, user: str,
                                                                   shown: str) -> None:
    """`user: 5` said "a step is a mapping with a `user` message" at the step, not what is wrong where."""
    p = _write(tmp_path, f"rules: support.yaml\nsteps:\n  - user: hi\n  - user: {user}\n", support_rules)
    res = CliRunner().invoke(eval_, ["--scenario", str(p), "--agent", "tests.monitor.offline.agents:memory_agent",
                                     "--no-progress"])
    assert res.exit_code == 2, res.output
    assert res.output == f"error: {p}:4:11: scenario-1, step 2: user: expected a string, got {shown}\n", res.output


@pytest.mark.parametrize("step", ["hi", "{expect: {none: true}}", "{user: null}"])
def test_a_step_that_is_no_mapping_or_has_no_user_is_an_error_at_the_step(tmp_path: Path, step: str) -> None:
    p = _write(tmp_path, f"steps:\n  - {step}\n")
    with pytest.raises(ScenarioError) as info:
        load_scenarios(p)
    assert str(info.value) == f"{p}:2:5: scenario-1, step 1: a step is a mapping with a `user` message"


def test_a_check_of_the_wrong_shape_in_one_step_does_not_hide_an_unknown_tool_in_another(tmp_path: Path,
                                                                                         support_rules: Path) -> None:
    """The steps' cases are loaded as a cases file: one of the wrong shape (a misspelt check) kept the others from
    being compiled, so an unknown tool of another step came out only once it was fixed."""
    p = _write(tmp_path, "agent: support\nrules: support.yaml\nsteps:\n  - user: where is order 1\n"
                         "    expect: {calls: [{tool: get_order_status, args: {order_id: {regx: 1}}}]}\n"
                         "  - user: hi\n    expect: {calls: [{tool: nope}]}\n", support_rules)
    with pytest.raises(ScenarioError) as info:
        load_and_build(p)
    assert str(info.value).splitlines() == [
        f"{p}:5:71: scenario-1, step 1, call 1: unknown key 'regx' (allowed: exact, from_input, fuzzy, group, "
        "normalized, numeric, one_of, regex, threshold, tolerance)",
        f"{p}:7:29: scenario-1, step 2, call 1: unknown tool 'nope': not in the catalog (known: get_order_history, "
        "get_order_status, get_shipping_eta)",
    ]


def test_every_problem_of_a_scenario_file_s_own_keys_is_reported_at_once(tmp_path: Path) -> None:
    """`agent: 5` beside `scenarios: []` said only "no scenario"; an unknown key hid the others too."""
    p = tmp_path / "s.yaml"
    p.write_text("agent: 5\nrules: [7]\ncolour: red\nscenarios: []\n", encoding="utf-8")
    with pytest.raises(ScenarioError) as info:
        load_scenarios(p)
    lines = str(info.value).splitlines()
    assert [line.split(": ", 1)[0] for line in lines] == [f"{p}:1:8", f"{p}:2:9", f"{p}:3:1", f"{p}:4:12"], lines
    assert "`agent` is the turns' agent name" in lines[0] and "`rules` is a path" in lines[1]
    assert "unknown key 'colour'" in lines[2] and "no scenario" in lines[3]

    p.write_text("agent: 5\nname: x\nscenarios:\n  - steps: [{user: hi}]\n", encoding="utf-8")
    with pytest.raises(ScenarioError) as info:
        load_scenarios(p)
    lines = str(info.value).splitlines()
    assert len(lines) == 2 and "`agent` is" in lines[0] and "`name` beside `scenarios`" in lines[1], lines
