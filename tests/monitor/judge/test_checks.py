"""Argument check modes, schema violation kinds, content not captured, malformed JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from monitor.judge import Judge, Tally
from monitor.rules import load_rules
from monitor.verdict import ViolationKind
from tests.monitor.judge.helpers import RULES, call, judge_for, turn

_MISSING = object()

# (check spec as YAML flow, input text, actual value or _MISSING, passes)
CHECKS: list[tuple[str, str, Any, bool]] = [
    ('"x"', "", "x", True),
    ('"x"', "", "X", False),
    ("{exact: 1}", "", 1.0, True),
    ("{exact: 1}", "", True, False),
    ("{exact: [1, 2]}", "", [1, 2], True),
    ("{exact: {k: v}}", "", {"k": "v"}, True),
    ('"x"', "", _MISSING, False),
    ('{normalized: "New York"}', "", "  new-york ", True),
    ('{normalized: "O\'Hare"}', "", 'o"hare', True),
    ('{normalized: "a.b/c*d^e_f,g"}', "", "ABCDEFG", True),
    ('{normalized: ["Los Angeles", "SF"]}', "", ["los_angeles", "sf"], True),
    ('{normalized: ["a", "b"]}', "", ["a"], False),
    ('{normalized: "Paris"}', "", "Parma", False),
    ('{one_of: [celsius, ""]}', "", _MISSING, True),
    ('{one_of: [celsius, ""]}', "", "celsius", True),
    ('{one_of: [celsius, ""]}', "", "kelvin", False),
    ("{one_of: [celsius]}", "", _MISSING, False),
    ("{one_of: [1.5, 2.0]}", "", 2, True),
    ("{one_of: [1.5, 2.0]}", "", True, False),
    ("{fuzzy: Kubernetes, threshold: 85}", "", "Kubernets", True),
    ("{fuzzy: Kubernetes, threshold: 85}", "", "Docker", False),
    ("{fuzzy: Kubernetes}", "", _MISSING, False),
    ("{numeric: 10, tolerance: 0.5}", "", 10.4, True),
    ("{numeric: 10, tolerance: 0.5}", "", 10.6, False),
    ("{numeric: 10, tolerance: 0.5}", "", "10.2", True),
    ("{numeric: 10}", "", 10, True),
    ("{numeric: 1}", "", True, False),
    ("{regex: '^[0-9]{4}$'}", "", "2024", True),
    ("{regex: '^[0-9]{4}$'}", "", "20245", False),
    ("{regex: '^[0-9]{4}$'}", "", 2024, True),
    ("{from_input: 'order ([A-Z]+[0-9]+)'}", "where is order AB12 now", "AB12", True),
    ("{from_input: 'order ([A-Z]+[0-9]+)'}", "where is order AB12 now", "AB13", False),
    ("{from_input: 'order ([A-Z]+[0-9]+)'}", "no order id here", "AB12", False),
    ("{from_input: 'user (?P<u>[a-z]+)', group: u}", "for user bob please", "bob", True),
    # A lone surrogate in the input (a client can send one as a JSON escape): RE2 reads UTF-8, and the capture is
    # made on the same surrogate-passing bytes the regex checks read.
    ("{from_input: 'order ([A-Z]+[0-9]+)'}", "\ud800 where is order AB12 now", "AB12", True),
    ("{from_input: 'order ([A-Z]+[0-9]+)'}", "\ud800 where is order AB12 now", "AB13", False),
    ("{from_input: 'note (.+)'}", "note \ud800x", "\ud800x", True),
    ("{from_input: 'note (.)'}", "note \ud800x", "\ud800", True),  # RE2 takes its three bytes as one character
    # A number argument equals the number the captured text spells, exactly (a large id is not rounded).
    ("{from_input: 'order ([0-9]+)'}", "refund order 123 now", 123, True),
    ("{from_input: 'order ([0-9]+)'}", "refund order 123 now", 124, False),
    ("{from_input: 'order ([0-9]+)'}", "refund order 123 now", 123.0, True),
    ("{from_input: 'order ([0-9.]+)'}", "refund order 12.5 now", 12.5, True),
    ("{from_input: 'order ([0-9]+)'}", "order 12345678901234567", 12345678901234568, False),
    ("{from_input: 'order ([0-9_]+)'}", "refund order 1_000 now", 1000, False),
    ("{from_input: 'order ([0-9]+)'}", "refund order 1 now", True, False),
    ("{from_input: 'order ([a-z]+)'}", "refund order abc now", 0, False),
]


@pytest.mark.parametrize(("spec", "text", "actual", "ok"), CHECKS)
def test_argument_check_modes(tmp_path: Path, spec: str, text: str, actual: Any, ok: bool) -> None:
    rules = f"""
catalog: {{tools: [{{name: t}}]}}
expect:
  - when: {{prefix: "!"}}
    call: [{{tool: t, args: {{v: {spec}}}}}]
"""
    judge = judge_for(tmp_path, rules)
    args = {} if actual is _MISSING else {"v": actual}
    v = judge.judge(turn("! " + text, call("t", args)))
    assert v.calls[0].outcome.value == "correct"
    assert v.calls[0].args_ok is ok
    (result,) = v.calls[0].arg_results
    assert result.argument == "v" and result.ok is ok
    assert v.args_ok is ok and v.end_to_end is ok


@pytest.fixture(scope="module")
def triage() -> Judge:
    return Judge(load_rules([RULES / "incident-triage.yaml", RULES / "travel.yaml"]))


@pytest.mark.parametrize(
    ("tool", "arguments", "kinds"),
    [
        ("pull_auth_telemetry", '{"log_excerpt": "x"}', []),
        ("pull_auth_telemetry", '{"log_excerpt": ', [ViolationKind.MALFORMED]),
        ("pull_auth_telemetry", "not json at all", [ViolationKind.MALFORMED]),
        ("pull_auth_telemetry", '{"log_excerpt": 5}', [ViolationKind.TYPE]),
        ("pull_auth_telemetry", "[]", [ViolationKind.TYPE]),
        ("pull_auth_telemetry", "{}", [ViolationKind.REQUIRED]),
        ("pull_auth_telemetry", '{"log_excerpt": "x", "more": 1}', [ViolationKind.ADDITIONAL]),
        ("pull_auth_telemetry", '{"log_excerpt": ""}', [ViolationKind.OTHER]),
        ("get_weather", '{"city": "Oslo", "unit": "kelvin"}', [ViolationKind.ENUM]),
        ("get_weather", '{"unit": 3}', [ViolationKind.ENUM, ViolationKind.REQUIRED]),
    ],
)
def test_schema_violation_kinds(triage: Judge, tool: str, arguments: str, kinds: list[ViolationKind]) -> None:
    agent = "travel" if tool == "get_weather" else "incident-triage"
    v = triage.judge(turn("[AUTH] x", call(tool, arguments), agent=agent))
    c = v.calls[0]
    assert c.schema_valid is (not kinds)
    assert sorted({x.kind for x in c.violations}) == sorted(kinds)
    assert v.schema_ok is (not kinds)


def test_content_not_captured_is_unjudged_for_arguments_and_schema(triage: Judge) -> None:
    v = triage.judge(turn("[AUTH] x", call("pull_auth_telemetry", None), agent="incident-triage"))
    c = v.calls[0]
    assert c.outcome.value == "correct" and not c.arguments_captured
    assert c.args_ok is None and c.schema_valid is None and c.arg_results == ()
    assert v.args_ok and v.schema_ok and v.selection_ok


def test_malformed_arguments_fail_the_argument_checks(triage: Judge) -> None:
    v = triage.judge(turn("[AUTH] x", call("pull_auth_telemetry", "{oops"), agent="incident-triage"))
    c = v.calls[0]
    assert c.outcome.value == "correct" and c.args_ok is False and c.schema_valid is False
    assert c.arg_results[0].actual == "<malformed arguments>"
    assert v.end_to_end is False and "malformed" in v.reason


def test_hallucinated_call_has_no_schema_verdict(triage: Judge) -> None:
    v = triage.judge(turn("[AUTH] x", call("pull_everything", json.dumps({"a": 1})), agent="incident-triage"))
    assert v.calls[0].outcome.value == "hallucinated" and v.calls[0].schema_valid is None


@pytest.mark.parametrize(
    "arguments", ["[" * 100_000, '{"log_excerpt": NaN}', '{"log_excerpt": "x", "window_minutes": 1e400}']
)
def test_hostile_arguments_never_raise(triage: Judge, arguments: str) -> None:
    v = triage.judge(turn("[AUTH] x", call("pull_auth_telemetry", arguments), agent="incident-triage"))
    assert v.calls[0].schema_valid is False


NOT_JSON_RULES = """
catalog:
  tools: [{name: a, schema: {type: object}}, {name: b}]
expect:
  - id: A
    when: {prefix: "[A]"}
    call: [{tool: a, args: {y: {one_of: [1, ""]}}}]
"""


@pytest.mark.parametrize(
    "arguments", ['{"x": NaN}', '{"x": Infinity}', '{"x": -Infinity}', '{"x": [1, {"z": NaN}]}', ' {"x": NaN} ']
)
@pytest.mark.parametrize("extra", [0, 4])  # one call (a plan), five calls (the general path)
def test_nan_and_infinity_are_not_json(tmp_path: Path, arguments: str, extra: int) -> None:
    # NaN, Infinity and -Infinity are no JSON values (RFC 8259); Python's json accepts them. METRICS.md: the arguments
    # must parse as JSON, malformed JSON is a schema violation of kind `malformed` and fails every argument check. The
    # judge took '{"x": NaN}' as valid for `{type: object}` and passed `y: {one_of: [1, ""]}` on it (y "omitted").
    # By hand: one correct call (of 1 + `extra` judged calls); schema adherence 0/1, argument correctness 0/1.
    judge = judge_for(tmp_path, NOT_JSON_RULES)
    t = turn("[A] q", call("a", arguments), *["b"] * extra)
    for v in (judge.judge(t), judge._general(t)):
        c = v.calls[0]
        assert c.outcome.value == "correct" and c.slot == 0
        assert c.schema_valid is False and [x.kind for x in c.violations] == [ViolationKind.MALFORMED]
        assert c.args_ok is False and c.arg_results[0].actual == "<malformed arguments>"
        assert v.schema_ok is False and v.args_ok is False and v.end_to_end is False
        tally = Tally()
        tally.add(v)
        figures = tally.ratios()
        assert figures["tool_call_accuracy"] == 1 / (1 + extra)
        assert figures["schema_adherence"] == 0.0 and figures["argument_correctness"] == 0.0


def test_nan_inside_a_string_is_json(tmp_path: Path) -> None:
    v = judge_for(tmp_path, NOT_JSON_RULES).judge(turn("[A] q", call("a", '{"x": "NaN", "y": 1}')))
    assert v.calls[0].schema_valid is True and v.calls[0].args_ok is True


TWO_RESPONSE_CHECKS = """
catalog:
  tools: [{name: a}]
expect:
  - id: two
    when: {prefix: "[R]"}
    call: [{tool: a}]
    respond: [{contains: "ok"}, {regex: 'ok\\s'}]
"""


@pytest.mark.parametrize("output", ["ok", "fine", "nothing ok"])
def test_one_of_several_response_checks_failing_is_worded_so(tmp_path: Path, output: str) -> None:
    # The reason cannot say which check failed (a plan's reason is made before any output is seen): it said
    # "response checks failed (2 checks)" when one of the two failed. The plan and the general path agree.
    judge = judge_for(tmp_path, TWO_RESPONSE_CHECKS)
    t = turn("[R] q", call("a"), output_text=output)
    v = judge.judge(t)
    assert v.response_ok is False
    assert v.reason == "failed (two): a response check failed (of 2)"
    assert judge._general(t).reason == v.reason


@pytest.mark.parametrize(
    ("spec", "actual", "expected_text", "actual_text"),
    [
        ("{exact: 5}", "5", "5", '"5"'),
        ("{exact: true}", "true", "true", '"true"'),
        ('{exact: "5"}', 5, '"5"', "5"),
        ("{one_of: [5]}", "5", "[5]", '"5"'),
    ],
)
def test_failed_check_of_a_lookalike_value_shows_the_types(
    tmp_path: Path, spec: str, actual: Any, expected_text: str, actual_text: str
) -> None:
    """A string "5" fails `exact: 5`: the reason must not read `expected '5', got '5'`. When the two texts would be the
    same, both are shown as JSON, so the quotes tell a string from a number or a boolean."""
    rules = f"""
catalog: {{tools: [{{name: t}}]}}
expect:
  - id: r
    when: {{prefix: "!"}}
    call: [{{tool: t, args: {{v: {spec}}}}}]
"""
    v = judge_for(tmp_path, rules).judge(turn("! x", call("t", {"v": actual})))
    (result,) = v.calls[0].arg_results
    assert result.ok is False
    assert (result.expected, result.actual) == (expected_text, actual_text)
    assert v.reason == f"failed (r): t.v {result.mode}: expected {expected_text!r}, got {actual_text!r}"


def test_failed_check_of_a_different_value_keeps_plain_text(tmp_path: Path) -> None:
    rules = """
catalog: {tools: [{name: t}]}
expect:
  - id: r
    when: {prefix: "!"}
    call: [{tool: t, args: {v: "eu-west-1"}}]
"""
    v = judge_for(tmp_path, rules).judge(turn("! x", call("t", {"v": "us-east-1"})))
    assert v.reason == "failed (r): t.v exact: expected 'eu-west-1', got 'us-east-1'"


@pytest.mark.parametrize(
    ("spec", "actual", "problem"),
    [
        (r"{regex: '\S'}", "", r"t.v regex: expected /\S/, got ''"),
        (r"{regex: '^\d+$'}", "a1", r"t.v regex: expected /^\d+$/, got 'a1'"),
        (r"{regex: '^\d+$'}", [1], r"t.v regex: expected /^\d+$/, got '[1]'"),  # not a str: the general path
        (r"{regex: '\S'}", _MISSING, r"t.v regex: expected /\S/, got '<missing>'"),
        (r"{from_input: 'order (\d+)'}", "5",
         r"t.v from_input: expected <no match of /order (\d+)/ in input>, got '5'"),
    ],
)
def test_a_failed_regex_check_shows_its_pattern_as_written(tmp_path: Path, spec: str, actual: Any, problem: str
                                                           ) -> None:
    """YAML `regex: '\\S'` holds one backslash: the reason shows the pattern as `rules explain` does (`/\\S/`), not
    through Python's repr (`'\\\\S'`, which reads as a doubled backslash in the YAML)."""
    rules = f"""
catalog: {{tools: [{{name: t}}]}}
expect:
  - id: r
    when: {{prefix: "!"}}
    call: [{{tool: t, args: {{v: {spec}}}}}]
"""
    args = {} if actual is _MISSING else {"v": actual}
    v = judge_for(tmp_path, rules).judge(turn("! x", call("t", args)))
    assert v.reason == f"failed (r): {problem}"


def test_a_failed_regex_check_of_malformed_arguments_shows_its_pattern_as_written(tmp_path: Path) -> None:
    rules = r"""
catalog: {tools: [{name: t}]}
expect:
  - id: r
    when: {prefix: "!"}
    call: [{tool: t, args: {v: {regex: '\S'}}}]
"""
    v = judge_for(tmp_path, rules).judge(turn("! x", call("t", "{bad json")))
    assert v.reason.startswith(r"failed (r): t.v regex: expected /\S/, got "), v.reason


ONE_RESPONSE_REGEX = """
catalog:
  tools: [{name: a}]
expect:
  - id: one
    when: {prefix: "[R]"}
    call: [{tool: a}]
    respond: [{regex: '^Result: \\d+ incidents$'}]
"""


def test_a_failed_response_regex_is_shown_as_written(tmp_path: Path) -> None:
    # It was shown through repr, its backslashes doubled ('^Result: \\\\d+ incidents$'), as argument regexes were
    # before they were shown between slashes.
    judge = judge_for(tmp_path, ONE_RESPONSE_REGEX)
    t = turn("[R] q", call("a"), output_text="Result: many incidents")
    v = judge.judge(t)
    assert v.reason == r"failed (one): response check failed: regex /^Result: \d+ incidents$/"
    assert judge._general(t).reason == v.reason
