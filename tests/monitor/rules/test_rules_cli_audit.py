"""`toolwatch rules explain` against the judge, `rules check` lint warnings, and hostile text in their output."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from monitor.cli import main
from monitor.judge import Judge
from monitor.records import ToolCall, Turn
from monitor.rules import load_rules

RULES = Path(__file__).resolve().parents[3] / "rules"
SHIPPED = sorted(str(p) for p in RULES.glob("*.yaml"))

# A file of its own beside the shipped ones: contains, equals, compound conditions, cases by input and by id.
EXTRA = """\
catalog:
  tools:
    - name: lookup
    - name: greet
expect:
  - id: exact-ping
    when: {equals: "ping"}
    none: true
  - id: refund
    when: {prefix: "[BILL]", contains: "refund"}
    call: [{tool: lookup}]
  - id: not-urgent
    when: {not: {contains: "urgent"}, any: [{contains: "order"}, {regex: '(?i)\\bstatus\\b'}]}
    call: [{tool: lookup, min: 1}]
  - id: hello
    when: {contains: "hello"}
    call: [{tool: greet}]
cases:
  - id: known-case
    input: "hello order"
    none: true
  - input: "Weather in Oslo?"
    call: [{tool: lookup}]
"""

TOKENS = ["[AUTH]", "[BILL]", "[SUPP]", "[RISK]", "[FULF]", " ", "\n", "hi", "hello", "thanks", "weather", "cold",
          "in Oslo", "in Zürich?", "fahrenheit", "AB-12345", "CD1234", "history", "user bob", "arrive", "shipping",
          "order", "refund", "urgent", "status", "ping", "?", "!", "Weather in Oslo?", "x"]
AGENTS = ["", "travel", "customer-support", "incident-triage", "someone-else"]


def explained_rule(files: list[str], text: str, agent: str, case_id: str | None) -> str | None:
    args = ["rules", "explain", *files, "--input", text, "--agent", agent]
    if case_id is not None:
        args += ["--case-id", case_id]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    first = result.stdout.splitlines()[0]
    if first.startswith("no rule matches"):
        return None
    assert first.startswith("rule "), first
    return first.split()[1]


def test_explain_names_the_rule_the_judge_uses_for_random_inputs_of_the_shipped_rules(tmp_path: Path) -> None:
    extra = tmp_path / "extra.yaml"
    extra.write_text(EXTRA)
    files = [*SHIPPED, str(extra)]
    judge = Judge(load_rules(files))

    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(st.lists(st.sampled_from(TOKENS), max_size=6).map(" ".join) | st.sampled_from(TOKENS),
           st.sampled_from(AGENTS), st.sampled_from([None, "known-case", "nope"]),
           st.lists(st.sampled_from(["lookup", "greet", "get_weather", "pull_auth_telemetry"]), max_size=2))
    def check(text: str, agent: str, case_id: str | None, calls: list[str]) -> None:
        turn = Turn(text, tuple(ToolCall(c, arguments="{}") for c in calls), agent=agent, case_id=case_id)
        verdict = judge.judge(turn)
        shown = explained_rule(files, text, agent, case_id)
        assert shown == verdict.rule, (text, agent, case_id, calls)

    check()


def run(*args: str, color: bool = False) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["rules", *args], color=color)
    return result.exit_code, result.stdout, result.stderr


def test_check_does_not_call_a_rule_on_a_boolean_attribute_shadowed_by_one_on_a_number(tmp_path: Path) -> None:
    """`equals: 1` and `equals: true` are different conditions (the judge matches a bool only by a bool), though
    1 == True in Python: the second rule is reached by turns whose attribute is true."""
    f = tmp_path / "attr.yaml"
    f.write_text("catalog:\n  tools:\n    - name: t\nexpect:\n"
                 "  - id: one\n    when: {attribute: {key: k, equals: 1}}\n    call: [{tool: t}]\n"
                 "  - id: is-true\n    when: {attribute: {key: k, equals: true}}\n    none: true\n"
                 "  - id: one-again\n    when: {attribute: {key: k, equals: 1.0}}\n    none: true\n")
    judge = Judge(load_rules([f]))
    assert judge.judge(Turn("x", attributes={"k": True})).rule == "is-true"
    code, out, _ = run("check", str(f))
    assert code == 0
    assert "rule 'is-true' can never match" not in out
    assert "rule 'one-again' can never match: rule 'one'" in out  # 1.0 == 1 to the judge too


def test_explain_and_check_escape_control_characters_of_rule_files_and_their_names(tmp_path: Path) -> None:
    """A description or a file name with ESC / BEL / a bidi override reaches the terminal escaped, as the rule-file
    errors and the reports show them (click strips only colour sequences, and not when writing to a terminal)."""
    f = tmp_path / "r\x1b]0;t\x07.yaml"
    f.write_text('catalog:\n  tools:\n    - name: t\nexpect:\n  - id: one\n'
                 '    description: "a \\e]0;pwned\\a b \\u202e c \\r d"\n    when: {contains: x}\n'
                 '    call: [{tool: t}]\n    respond: [{contains: R, description: "e \\e[2J f"}]\n'
                 '  - id: two\n    when: {contains: x}\n    none: true\n')
    code, out, _ = run("explain", str(f), "--input", "x", "--output", "R", color=True)
    assert code == 0
    assert "description: a \\x1b]0;pwned\\x07 b \\u202e c \\x0d d" in out
    assert "(e \\x1b[2J f)" in out
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out and "\r" not in out
    code, out, _ = run("check", str(f), color=True)
    assert code == 0
    assert "r\\x1b]0;t\\x07.yaml: ok" in out and "warning: rule 'two' can never match" in out
    assert "\x1b" not in out and "\x07" not in out


def test_explain_says_how_a_labelled_case_applies_not_always(tmp_path: Path) -> None:
    """A case is found by the turn's case id or by its exact input: explain says which, not `when: always`."""
    f = tmp_path / "cases.yaml"
    f.write_text("catalog:\n  tools:\n    - name: t\ncases:\n  - input: hello\n    none: true\n"
                 "  - id: c2\n    input: other\n    call: [{tool: t}]\n")
    code, out, _ = run("explain", str(f), "--input", "hello")
    assert code == 0
    assert "when: always" not in out
    assert "when: labelled case: the input equals 'hello'" in out
    code, out, _ = run("explain", str(f), "--input", "whatever", "--case-id", "c2")
    assert code == 0
    assert "when: labelled case: the case id is 'c2'" in out


def test_check_accepts_rules_on_tools_another_of_the_files_declares(tmp_path: Path) -> None:
    """Files loaded together share one catalog (serve takes these two): checking them together does not fail the
    file whose rules name the other's tools, and warns of its argument check the tool's schema forbids."""
    tools = tmp_path / "tools.yaml"
    tools.write_text("catalog:\n  tools:\n    - name: t\n      schema: {type: object, properties: {a: {type: string}}, "
                     "additionalProperties: false}\n")
    agent = tmp_path / "agent.yaml"
    agent.write_text("agent: x\nexpect:\n  - id: r\n    when: {contains: x}\n    call: [{tool: t, args: {b: 1}}]\n"
                     "alerts:\n  - {name: TLow, figure: tool_call_accuracy, tool: t, below: 0.9}\n")
    load_rules([agent, tools])  # as serve loads them
    code, out, err = run("check", str(agent), str(tools))
    assert code == 0, err
    assert f"{agent}: ok (agent x; 0 tool(s), 1 expect rule(s)" in out
    assert "merged: ok" in out
    assert out.count("argument check on 'b', which the schema of t does not allow") == 1
    assert "in no catalog" not in out  # t is declared, in the other file
    code, _, err = run("check", str(agent))  # alone, its tool is unknown
    assert code == 2 and "unknown tool 't'" in err


def test_check_warns_of_a_prefix_that_begins_with_whitespace(tmp_path: Path) -> None:
    """The input's leading whitespace is set aside before a prefix is compared, so a prefix beginning with whitespace
    can never match (alone, or beside other conditions all must hold); under `not` or among alternatives it is no
    warning of that rule."""
    f = tmp_path / "ws.yaml"
    f.write_text("catalog:\n  tools:\n    - name: t\nexpect:\n"
                 "  - id: spaced\n    when: {prefix: '  [AUTH]'}\n    call: [{tool: t}]\n"
                 '  - id: spaced-too\n    when: {prefix: "\\t[BILL]", contains: x}\n    none: true\n'
                 "  - id: negated\n    when: {not: {prefix: ' x'}}\n    none: true\n"
                 "  - id: either\n    when: {any: [{prefix: ' x'}, {contains: y}]}\n    none: true\n")
    judge = Judge(load_rules([f]))
    assert judge.judge(Turn("  [AUTH] login failed", calls=(ToolCall("t"),))).rule != "spaced"
    code, out, _ = run("check", str(f))
    assert code == 0
    assert "rule 'spaced' can never match: its prefix '  [AUTH]' begins with whitespace" in out
    assert "rule 'spaced-too' can never match: its prefix '\\t[BILL]' begins with whitespace" in out
    assert "'negated' can never" not in out and "'either' can never" not in out
