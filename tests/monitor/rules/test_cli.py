"""`toolwatch rules check | explain | schema` through click's CliRunner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from monitor.cli import main

RULES = Path(__file__).resolve().parents[3] / "rules"
TRIAGE = str(RULES / "incident-triage.yaml")


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["rules", *args])
    return result.exit_code, result.stdout, result.stderr


def test_check_ok_summarizes() -> None:
    code, out, err = run("check", TRIAGE, str(RULES / "travel.yaml"))
    assert code == 0, err
    assert "incident-triage.yaml: ok (agent incident-triage; 5 tool(s), 5 expect rule(s)" in out
    assert "merged: ok" in out and err == ""


def test_check_bad_file_exits_2_with_location(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("catalog:\n  tools:\n    - name: t\n      colour: red\n")
    code, out, err = run("check", TRIAGE, str(bad))
    assert code == 2
    assert f"{bad}:4:7: catalog.tools[0].colour: unknown key 'colour'" in err
    assert "incident-triage.yaml: ok" in out


def test_check_files_that_conflict_only_together(tmp_path: Path) -> None:
    other = tmp_path / "other.yaml"
    other.write_text("catalog:\n  tools:\n    - name: pull_auth_telemetry\n      schema: {type: array}\n")
    code, _, err = run("check", TRIAGE, str(other))
    assert code == 2 and "different schema" in err and "(when loaded together)" in err


def test_check_counts_every_case_and_warns_of_one_serve_never_reaches(tmp_path: Path) -> None:
    """Two id-less cases with one input are two cases; the second is never reached by `serve` (a turn without a
    case id finds the first case of its input), which check says, naming both."""
    path = tmp_path / "cases.yaml"
    path.write_text(
        "catalog:\n  tools:\n    - name: get_order_status\n    - name: get_shipping_eta\n"
        "cases:\n"
        "  - input: where is order 1\n    call: [{tool: get_order_status}]\n"
        "  - input: where is order 1\n    call: [{tool: get_shipping_eta}]\n"
        "  - {id: c3, input: where is order 2, none: true}\n"
        "  - {id: c4, input: where is order 2, none: true}\n"  # found by its id: reached
    )
    code, out, err = run("check", str(path))
    assert code == 0, err
    assert "0 forbid rule(s), 4 case(s)" in out
    warnings = [line for line in out.splitlines() if "warning" in line]
    assert warnings == [
        f"{path}:8: warning: case 'case:cases:2' is never reached by `serve`: case 'case:cases:1' ({path}:6) has the "
        "same input and comes first (a case without an id is found by its input); give it an id"
    ]


def test_check_warns_of_a_case_another_file_shadows_for_its_agent_only(tmp_path: Path) -> None:
    """Agents' files may each label one input (each agent finds its own case); an unscoped file's earlier case of
    that input is found first for every agent, so a later scoped case of it is never reached."""
    paths = []
    for name, head in (("shared", ""), ("alpha", "agent: alpha\n"), ("beta", "agent: beta\n")):
        path = tmp_path / f"{name}.yaml"
        inputs = ["hello", "order 1"] if name != "shared" else ["order 1"]
        path.write_text(head + f"catalog: {{tools: [{{name: t_{name}}}]}}\ncases:\n"
                        + "".join(f"  - {{input: {i}, none: true}}\n" for i in inputs))  # fmt: skip
        paths.append(str(path))
    code, out, err = run("check", *paths)
    assert code == 0, err
    warnings = [line for line in out.splitlines() if "warning" in line]
    assert warnings == [
        f"{tmp_path / name}.yaml:5: warning: case 'case:{name}:2' is never reached by `serve`: case 'case:shared:1' "
        f"({tmp_path / 'shared.yaml'}:3) has the same input and comes first (a case without an id is found by its "
        "input); give it an id"
        for name in ("alpha", "beta")
    ]


def test_explain_shows_the_matching_rule() -> None:
    code, out, _ = run("explain", TRIAGE, "--input", "[RISK] card velocity [AUTH] in body")
    assert code == 0
    assert "rule risk [agent incident-triage]" in out
    assert "input starts with '[RISK]'" in out
    assert "pull_risk_telemetry: exactly 1 call(s)" in out


def test_explain_with_calls_prints_the_verdict() -> None:
    code, out, _ = run(
        "explain", TRIAGE, "--input", "[RISK] x", "--agent", "incident-triage",
        "--call", 'pull_auth_telemetry={"log_excerpt": "x"}', "--call", "nope",
    )  # fmt: skip
    assert code == 0
    assert "call 0 pull_auth_telemetry: wrong_tool schema ok" in out
    assert "call 1 nope: hallucinated" in out
    assert "called pull_auth_telemetry instead of pull_risk_telemetry" in out


def test_explain_prints_an_object_valued_check(tmp_path: Path) -> None:
    path = tmp_path / "obj.yaml"
    path.write_text(
        "catalog:\n  tools:\n    - name: t\n"
        "expect:\n  - when: {prefix: go}\n    call:\n      - tool: t\n        args: {where: {exact: {city: Oslo}}}\n"
    )
    code, out, err = run("explain", str(path), "--input", "go")
    assert code == 0, err
    assert 'where: exact {"city": "Oslo"}' in out


def test_explain_no_match() -> None:
    code, out, _ = run("explain", TRIAGE, "--input", "hello there")
    assert code == 0 and "no rule matches" in out


def test_explain_bad_file_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("expect: [1\n")
    code, _, err = run("explain", str(bad), "--input", "x")
    assert code == 2 and f"{bad}:" in err and "YAML" in err


def test_schema_command_prints_the_schema() -> None:
    code, out, _ = run("schema")
    assert code == 0 and json.loads(out)["title"] == "toolwatch oracle rule file"


def test_help_lists_rules() -> None:
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0 and "rules" in result.output
    result = CliRunner().invoke(main, ["rules", "explain", "--help"])
    assert "--input" in result.output and "--call" in result.output


def test_check_warns_about_rules_that_can_never_match(tmp_path: Path) -> None:
    path = tmp_path / "shadow.yaml"
    path.write_text(
        "catalog: {tools: [{name: t}]}\n"
        "expect:\n"
        "  - {id: auth, when: {prefix: '[AUTH]'}, none: true}\n"
        "  - {id: auth2fa, when: {prefix: '[AUTH][2FA]'}, none: true}\n"
        "  - {id: again, when: {prefix: '[AUTH]'}, none: true}\n"
        "  - {id: other, when: {prefix: '[BILL]'}, none: true}\n"
        "  - {id: any, none: true}\n"
        "  - {id: late, when: {contains: x}, none: true}\n"
    )
    code, out, _ = run("check", str(path))
    assert code == 0
    warnings = [line for line in out.splitlines() if "warning:" in line]
    assert [w.split("rule ", 1)[1].split(" ", 1)[0] for w in warnings] == ["'auth2fa'", "'again'", "'late'"]
    assert f"{path}:4: warning: rule 'auth2fa' can never match: rule 'auth' ({path}:3) matches first" in out


def test_check_warns_about_burn_rate_alerts_that_can_never_fire(tmp_path: Path) -> None:
    # objective 0.9: the page needs an error ratio above 14.4 x 0.1 = 1.44, more than any ratio can be; the ticket
    # (6 x 0.1 = 0.6) can fire. 0.95 (the shipped objective): both can (0.72, 0.3).
    path = tmp_path / "slo.yaml"
    path.write_text(
        "catalog: {tools: [{name: t}]}\n"
        "alerts:\n"
        "  - {name: Fine, figure: tool_call_accuracy, objective: 0.95}\n"
        "  - {name: Loose, figure: tool_call_accuracy, objective: 0.9}\n"
    )
    code, out, _ = run("check", str(path))
    assert code == 0
    warnings = [line for line in out.splitlines() if "warning:" in line]
    assert len(warnings) == 1
    assert warnings[0].startswith(f"{path}:4: warning: alert 'Loose': the critical alert")
    assert "above 1.44)" in warnings[0] and "it can from 0.9306 on" in warnings[0]
    # `alerts render` still renders it, and says so on stderr (stdout stays a clean rule file)
    result = CliRunner().invoke(main, ["alerts", "render", str(path)])
    assert result.exit_code == 0
    assert result.stderr.strip() == warnings[0]
    assert "warning:" not in result.stdout


def test_check_warns_about_an_alert_on_a_tool_no_catalog_declares(tmp_path: Path) -> None:
    # With from_definitions an alert may name an offered tool the rules do not declare: only declared tools are
    # metric label values, so its calls count as `__other__`, its per-tool series never exists, and the alert never
    # fires (in Prometheus or in process). A declared tool's alert says nothing.
    path = tmp_path / "open.yaml"
    path.write_text(
        "catalog: {from_definitions: true, tools: [{name: search}]}\n"
        "alerts:\n"
        "  - {name: SearchLow, figure: tool_call_accuracy, tool: search, below: 0.5}\n"
        "  - {name: LookupLow, figure: tool_call_accuracy, tool: lookup, below: 0.5}\n"
    )
    code, out, _ = run("check", str(path))
    assert code == 0
    warnings = [line for line in out.splitlines() if "warning:" in line]
    assert warnings == [
        f"{path}:4: warning: alert 'LookupLow': tool 'lookup' is in no catalog (only offered): /metrics counts its "
        "calls as `__other__`, so this alert can never fire; declare it in a catalog"
    ]


def _shadowed_reference(rs: object) -> list[str]:
    """The definition, pair by pair: a rule is shadowed by the first earlier rule of its scope (or of every agent)
    that has no `when`, the same `when`, or a prefix its own prefix extends."""
    from monitor.rules._model import Always, Prefix

    out = []
    rules = rs.expectations  # type: ignore[attr-defined]
    for j, later in enumerate(rules):
        for earlier in rules[:j]:
            a, b = earlier.when, later.when
            if (earlier.agent is None or earlier.agent == later.agent) and (
                isinstance(a, Always) or a == b
                or (isinstance(a, Prefix) and isinstance(b, Prefix) and b.text.startswith(a.text))
            ):
                out.append(f"{later.source}:{later.line}: warning: rule {later.id!r} can never match: "
                           f"rule {earlier.id!r} ({earlier.source}:{earlier.line}) matches first")
                break
    return out


def test_shadowed_rules_are_found_in_linear_time_as_pair_by_pair(tmp_path: Path) -> None:
    """`rules check` compared every rule with every earlier one: 10,000 rules took 50 s in that pass alone (50
    million comparisons), 100,000 would take over an hour. The same warnings come from one pass now."""
    import random
    import time

    from monitor.rules import load_rules
    from monitor.rules._lint import shadowed_rules

    rng = random.Random(7)
    whens = ["", "when: {prefix: '[A]'}", "when: {prefix: '[A][B]'}", "when: {prefix: '[A][B]x'}",
             "when: {prefix: '[B]'}", "when: {contains: x}", "when: {regex: 'a+'}", "when: {equals: 'q'}",
             "when: {attribute: {key: k, equals: 1}}", "when: {all: [{prefix: '[A]'}, {contains: y}]}"]
    for trial in range(30):
        files = []
        for f, agent in enumerate(["", "agent: a\n", "agent: b\n"]):
            rows = "".join("  - {" + ", ".join(p for p in (f"id: r{trial}_{f}_{i}", rng.choice(whens), "none: true")
                                              if p) + "}\n" for i in range(rng.randrange(1, 12)))
            path = tmp_path / f"t{trial}_{f}.yaml"
            path.write_text(f"{agent}catalog: {{tools: [{{name: t}}]}}\nexpect:\n{rows}")
            files.append(path)
        for chosen in (files[:1], files, files[1:]):
            rs = load_rules(chosen)
            assert shadowed_rules(rs) == _shadowed_reference(rs)
    big = tmp_path / "big.yaml"
    big.write_text("catalog: {tools: [{name: t}]}\nexpect:\n" + "".join(
        f"  - {{when: {{contains: 'w{i}'}}, none: true}}\n" for i in range(10_000)))
    rs = load_rules([big])
    started = time.monotonic()
    assert shadowed_rules(rs) == []
    assert time.monotonic() - started < 2


def test_explain_with_only_an_output_prints_the_verdict_of_a_turn_without_calls() -> None:
    """--output alone was ignored (the verdict came only with --call), so a turn that made no call, the answer of a
    `none: true` rule, could not be explained; a turn without --output now says its response checks were not run."""
    travel = str(RULES / "travel.yaml")
    code, out, _ = run("explain", travel, "--agent", "travel", "--input", "hello", "--output", "Hi!")
    assert code == 0
    assert out.endswith("verdict:\n  ok (greeting): no tool\n"), out
    code, out, _ = run("explain", travel, "--agent", "travel", "--input", "Weather in Oslo?", "--output", "Cold")
    assert code == 0
    assert "verdict:\n  failed (weather): missed get_weather" in out and "response check failed" in out
    code, out, _ = run("explain", TRIAGE, "--input", "[AUTH] x", "--call", 'pull_auth_telemetry={"log_excerpt": "x"}')
    assert code == 0
    assert out.endswith("  ok (auth): pull_auth_telemetry\n  response checks not run: give the answer with --output\n")
    code, out, _ = run("explain", TRIAGE, "--input", "[AUTH] x")
    assert "verdict:" not in out and "not run" not in out


def test_a_missing_rule_file_is_named_once_without_the_errno(tmp_path: Path) -> None:
    """It read `x.yaml:0:0: cannot read: [Errno 2] No such file or directory: 'x.yaml'` (the path twice, and line 0
    column 0, which is no place in the file)."""
    missing = tmp_path / "missing.yaml"
    code, _, err = run("check", str(missing))
    assert code == 2
    assert err == f"{missing}: cannot read: No such file or directory\n"


def test_check_warns_about_an_argument_check_on_an_argument_the_tool_schema_allows_no_call_to_have(
    tmp_path: Path,
) -> None:
    """A misspelt argument in `args` (`town` for `city`) loaded silently: with `additionalProperties: false` no
    schema-valid call has it, so the check fails every call that keeps to the schema. A schema that lets other
    arguments in (no `additionalProperties: false`, or `patternProperties`) gives no warning, nor does a tool without
    a schema; labelled cases are checked too."""
    path = tmp_path / "typo.yaml"
    path.write_text(
        "catalog:\n"
        "  tools:\n"
        "    - {name: w, schema: {type: object, properties: {city: {type: string}, unit: {}}, "
        "additionalProperties: false}}\n"
        "    - {name: open, schema: {type: object, properties: {city: {}}}}\n"
        "    - {name: pat, schema: {type: object, properties: {city: {}}, patternProperties: {'^x_': {}}, "
        "additionalProperties: false}}\n"
        "    - {name: bare}\n"
        "expect:\n"
        "  - id: weather\n"
        "    when: {contains: weather}\n"
        "    call: [{tool: w, args: {town: Oslo, unit: c}}]\n"
        "  - {id: ok, when: {contains: x}, call: [{tool: open, args: {town: a}}, {tool: pat, args: {x_y: 1}}, "
        "{tool: bare, args: {q: 1}}]}\n"
        "cases:\n"
        "  - {id: c1, input: 'weather in Oslo', call: [{tool: w, args: {city: Oslo, zip: '0150'}}]}\n"
    )
    code, out, _ = run("check", str(path))
    assert code == 0
    warnings = [line for line in out.splitlines() if "warning:" in line]
    assert warnings == [
        f"{path}:8: warning: rule 'weather': argument check on 'town', which the schema of w does not allow "
        "(additionalProperties: false; its properties: city, unit): it fails every call that keeps to the schema",
        f"{path}:13: warning: rule 'case:c1': argument check on 'zip', which the schema of w does not allow "
        "(additionalProperties: false; its properties: city, unit): it fails every call that keeps to the schema",
    ]
    code, out, _ = run("check", *(str(p) for p in sorted(RULES.glob("*.yaml"))))
    assert code == 0 and "warning:" not in out


def test_explain_says_when_no_rule_file_applies_to_the_given_agent() -> None:
    """`--agent nobody` (or a typo of the agent's name) gave a bare `no rule matches` for an input the file routes,
    with no hint that the file is scoped to another agent."""
    code, out, _ = run("explain", TRIAGE, "--input", "[AUTH] x", "--agent", "incident-triag")
    assert code == 0
    assert out == (
        "no rule matches: the turn is unjudged (catalog, schema and forbid checks still apply)\n"
        "note: no rule file is scoped to agent 'incident-triag' (they name: incident-triage); only the rules of files "
        "without `agent:` apply to its turns\n"
    )
    code, out, _ = run("explain", TRIAGE, "--input", "hello", "--agent", "incident-triage")
    assert code == 0 and "note:" not in out


def test_check_reports_every_schema_error_of_a_file_in_one_run(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "catalog:\n  tools:\n    - name: a\n      colour: red\n    - name: b\n"
        "expect:\n  - call: [{tool: a, exactly: two}]\n  - none: true\n    bogus: 1\n"
        "forbid:\n  - {tool: 5}\n"
    )
    code, out, err = run("check", str(bad))
    assert code == 2 and out == ""
    assert err.splitlines() == [
        f"{bad}:4:7: catalog.tools[0].colour: unknown key 'colour' (allowed: description, name, schema)",
        f'{bad}:7:31: expect[0].call[0].exactly: expected integer, got string "two"',
        f"{bad}:9:5: expect[1].bogus: unknown key 'bogus' (allowed: any_of, call, description, forbid, id, none, "
        "order, respond, when)",
        f"{bad}:11:12: forbid[0].tool: expected string, got integer 5",
    ]


def test_check_reports_the_error_of_every_rule_in_one_run(tmp_path: Path) -> None:
    """A file valid by the schema whose rules are wrong each their own way: each rule's error, in file order."""
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "catalog:\n  tools:\n    - name: a\n      schema: {type: nonsense}\n    - name: b\n    - name: b\n"
        "expect:\n  - call: [{tool: a}]\n  - call: [{tool: zz}]\n  - call: [{tool: b, min: 3, max: 1}]\n"
        "  - {id: x, none: true}\n  - {id: x, none: true}\n"
        "forbid:\n  - {tool: qq}\n"
    )
    code, _, err = run("check", str(bad))
    assert code == 2
    lines = err.splitlines()
    assert [line.split(": ")[0:2] for line in lines] == [
        [f"{bad}:4:22", "catalog.tools[0].schema.type"],  # `a` stays a known tool: no error for expect[0]
        [f"{bad}:6:13", "catalog.tools[2].name"],
        [f"{bad}:9:19", "expect[1].call[0].tool"],
        [f"{bad}:10:27", "expect[2].call[0].min"],
        [f"{bad}:12:10", "expect[4].id"],
        [f"{bad}:14:12", "forbid[0].tool"],
    ]
    assert "unknown tool 'zz'" in lines[2] and "duplicate rule id 'x'" in lines[4]


def test_check_reports_at_most_50_errors_then_how_many_more(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    rules = "".join(f"  - call: [{{tool: t{i}}}]\n" for i in range(60))
    bad.write_text("catalog: {tools: [{name: a}]}\nexpect:\n" + rules)
    code, _, err = run("check", str(bad))
    lines = err.splitlines()
    assert code == 2 and len(lines) == 51, err
    assert lines[0].startswith(f"{bad}:3:") and "unknown tool 't0'" in lines[0]
    assert "unknown tool 't49'" in lines[49] and lines[50] == "... and 10 more"


def test_check_a_file_given_twice_is_checked_once(tmp_path: Path) -> None:
    """Overlapping globs (`rules/*.yaml rules/travel.yaml`) name a file twice: it is one file, not a duplicate of
    every rule id of its own (the commands that merge rule files load it once)."""
    link = tmp_path / "triage.yaml"
    link.symlink_to(TRIAGE)
    code, out, err = run("check", TRIAGE, str(RULES / "travel.yaml"), TRIAGE, str(link))
    assert code == 0, err
    assert out.count("incident-triage.yaml: ok") == 1 and str(link) not in out
    assert "merged: ok" in out and err == ""


TYPO = """version: 1
catalog:
  tools:
    - name: search
expect:
  - id: find
    when: {prefix: "find"}
    cal: [{tool: search}]
"""
BAD = """version: 1
catalog:
  tools:
    - name: search
    - name: fetch
expect:
  - id: find
    when: {prefix: "find"}
    call: [{tool: serch}]
  - id: lookbehind
    when: {regex: "(?<=a)b"}
    call: [{tool: fetch}]
  - id: fetch-url
    when: {contains: "http"}
    call: [{tool: fetch, args: {url: {regex: "^(https?://"}, retries: {numeric: 3, tolerance: 0.5}}}]
"""


def test_the_error_samples_of_the_rules_readme_are_what_check_prints(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                                     ) -> None:
    readme = (RULES / "README.md").read_text()
    section = readme[readme.index("Every error names the file") : readme.index("`rules check` also warns")]
    blocks = section.split("```")[1::2]
    assert len(blocks) == 2
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "typo.yaml").write_text(TYPO)
    (tmp_path / "rules" / "bad.yaml").write_text(BAD)
    monkeypatch.chdir(tmp_path)
    printed = [run("check", f"rules/{name}.yaml")[2] for name in ("typo", "bad")]
    assert [p.strip() for p in printed] == [b.strip() for b in blocks]


def test_explain_shows_the_patterns_of_argument_and_response_checks_alike(tmp_path: Path) -> None:
    """`regex: '\\S'` holds one backslash: explain shows every pattern as written, between slashes."""
    path = tmp_path / "re.yaml"
    path.write_text(
        "catalog:\n  tools:\n    - name: t\n"
        "expect:\n  - when: {regex: '^go\\b'}\n    call:\n      - tool: t\n"
        "        args: {v: {regex: '\\S'}, n: {from_input: 'go (\\d+)'}}\n"
        "    respond:\n      - regex: '\\d'\n"
    )
    code, out, err = run("explain", str(path), "--input", "go 1")
    assert code == 0, err
    assert "input matches /^go\\b/" in out
    assert "    v: regex /\\S/\n" in out
    assert "    n: from_input /go (\\d+)/ (group 1)\n" in out
    assert "response matches /\\d/" in out
