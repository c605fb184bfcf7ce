"""Routing, compound conditions, agent scoping, forbid/unless, order, respond, cases, definitions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from monitor.judge import Judge
from monitor.records import Turn
from monitor.rules import load_rules
from tests.monitor.judge.helpers import RULES, call, judge_for, turn, write

ROUTING = """
catalog: {tools: [{name: t}]}
expect:
  - id: r-regex
    when: {regex: '(?i)\\bdisk full\\b'}
    none: true
  - id: r-prefix-long
    when: {prefix: "[AUTH][2FA]"}
    none: true
  - id: r-prefix
    when: {prefix: "[AUTH]"}
    none: true
  - id: r-contains
    when: {contains: "timeout"}
    none: true
  - id: r-equals
    when: {equals: "ping"}
    none: true
  - id: r-all
    when: {all: [{prefix: "[BILL]"}, {attribute: {key: env, equals: prod}}]}
    none: true
  - id: r-any
    when: {any: [{attribute: {key: tier, prefix: gold}}, {regex: 'VIP'}]}
    none: true
  - id: r-not
    when: {not: {regex: '[a-z]'}}
    none: true
  - id: r-implicit-all
    when: {prefix: "[BILL]", contains: "refund"}
    none: true
  - id: r-resource
    when: {attribute: {key: service.name, source: resource, regex: '^billing-'}}
    none: true
  - id: r-exists
    when: {attribute: {key: toolwatch.priority, exists: true}}
    none: true
  - id: r-default
    none: true
"""


@pytest.mark.parametrize(
    ("text", "attrs", "resource", "rule"),
    [
        ("[AUTH] Disk full on node", {}, {}, "r-regex"),  # an earlier regex rule beats a later prefix rule
        ("[AUTH][2FA] code rejected", {}, {}, "r-prefix-long"),
        ("[AUTH] token timeout", {}, {}, "r-prefix"),  # prefix (rule 2) before contains (rule 3)
        ("db timeout", {}, {}, "r-contains"),
        ("ping", {}, {}, "r-equals"),
        ("ping ", {}, {}, "r-default"),
        ("[BILL] charge", {"env": "prod"}, {}, "r-all"),
        ("[BILL] charge", {"env": "dev"}, {}, "r-default"),
        ("[BILL] charge", {"tier": "gold-plus"}, {}, "r-any"),
        ("a VIP asks", {}, {}, "r-any"),
        ("12345 !!", {}, {}, "r-not"),
        ("[BILL] refund please", {}, {}, "r-implicit-all"),
        ("[BILL] charge", {}, {"service.name": "billing-api"}, "r-resource"),
        ("[BILL] charge", {"toolwatch.priority": 1}, {}, "r-exists"),
        ("anything else", {}, {}, "r-default"),
    ],
)
def test_first_matching_rule_in_file_order(
    tmp_path: Path, text: str, attrs: dict[str, str], resource: dict[str, str], rule: str
) -> None:
    judge = judge_for(tmp_path, ROUTING)
    t = Turn(text, attributes=attrs, resource=resource)
    exp = judge.expectation(t)
    assert exp is not None and exp.id == rule
    assert judge.judge(t).rule == rule


def test_order_constraints_and_sequence_score(tmp_path: Path) -> None:
    judge = judge_for(
        tmp_path,
        """
catalog: {tools: [{name: search}, {name: book}, {name: pay}]}
expect:
  - when: {prefix: trip}
    call: [{tool: search}, {tool: book}, {tool: pay, min: 0}]
    order: [[search, book, pay], {before: search, after: book}]
""",
    )
    v = judge.judge(turn("trip", "search", "book", "pay"))
    assert v.sequence_ok is True and v.sequence_score == 1.0 and v.end_to_end
    v = judge.judge(turn("trip", "book", "search"))
    # [search, book, pay]: LCS 1 of 3; [search, book]: LCS 1 of 2 -> mean (1/3 + 1/2) / 2
    assert v.sequence_ok is False and v.sequence_score == pytest.approx((1 / 3 + 1 / 2) / 2)
    assert v.selection_ok and not v.end_to_end and "order" in v.reason


def test_forbid_with_unless_and_rule_forbid(tmp_path: Path) -> None:
    judge = judge_for(
        tmp_path,
        """
catalog: {tools: [{name: read}, {name: delete}, {name: export}]}
forbid:
  - tool: delete
    unless: {contains: "confirmed"}
expect:
  - when: {prefix: "q"}
    call: [{tool: read, min: 0}, {tool: delete, min: 0}, {tool: export, min: 0}]
    forbid: [{tool: export}]
""",
    )
    assert judge.judge(turn("q please", "read")).forbidden == ()
    v = judge.judge(turn("q please", "read", "delete"))
    assert v.forbidden == ("delete",) and v.selection_ok and v.end_to_end is False
    assert "forbidden tool delete" in v.reason
    assert judge.judge(turn("q confirmed", "delete")).forbidden == ()
    assert judge.judge(turn("q confirmed", "export", "delete")).forbidden == ("export",)
    # Forbid still applies when no rule matches.
    v = judge.judge(turn("unmatched", "delete"))
    assert not v.judged and v.forbidden == ("delete",) and v.failed


@pytest.mark.parametrize(
    ("output", "ok"),
    [("Checked.\nResult: escalate to on-call", True), ("Result:", False), ("no result line", False), (None, None)],
)
def test_respond_checks(output: str | None, ok: bool | None) -> None:
    judge = Judge(load_rules([RULES / "incident-triage.yaml"]))
    v = judge.judge(turn("[RISK] x", call("pull_risk_telemetry", {"log_excerpt": "x"}), output_text=output))
    assert v.response_ok is ok
    assert v.end_to_end is (ok is not False)


CASES = """
catalog: {tools: [{name: a}, {name: b}]}
expect:
  - when: {prefix: "q"}
    call: [{tool: a}]
cases:
  - id: c1
    call: [{tool: b, args: {n: 1}}]
  - input: "q exact input"
    none: true
"""


def test_cases_override_rules_by_id_attribute_field_or_exact_input(tmp_path: Path) -> None:
    judge = judge_for(tmp_path, CASES)
    assert judge.judge(turn("q any", "a")).rule is not None
    by_attr = judge.judge(Turn("q any", (call("b", {"n": 1}),), attributes={"toolwatch.case.id": "c1"}))
    assert by_attr.rule == "case:c1" and by_attr.end_to_end
    by_field = judge.judge(Turn("q any", (call("a"),), case_id="c1"))
    assert by_field.rule == "case:c1" and [c.outcome.value for c in by_field.calls] == ["wrong_tool"]
    by_input = judge.judge(turn("q exact input", "a"))
    assert by_input.rule is not None and by_input.rule.startswith("case:")
    assert [c.outcome.value for c in by_input.calls] == ["spurious"]
    assert judge.judge(Turn("q any", (call("a"),), case_id="unknown")).rule != "case:c1"


@pytest.mark.parametrize("suffix", [".jsonl", ".yaml"])
def test_cases_from_a_dataset_file(tmp_path: Path, suffix: str) -> None:
    items = [{"id": "k1", "input": "where is AB1", "call": [{"tool": "a"}]}, {"id": "k2", "none": True}]
    if suffix == ".jsonl":
        (tmp_path / f"cases{suffix}").write_text("\n".join(json.dumps(i) for i in items) + "\n")
    else:
        (tmp_path / f"cases{suffix}").write_text(json.dumps(items))
    path = write(tmp_path, f"catalog: {{tools: [{{name: a}}]}}\ncases: cases{suffix}\n")
    judge = Judge(load_rules([path]))
    assert judge.judge(turn("where is AB1", "a")).rule == "case:k1"
    assert judge.judge(Turn("x", case_id="k2")).selection_ok is True


def test_from_definitions_extends_the_catalog_per_turn(tmp_path: Path) -> None:
    judge = judge_for(
        tmp_path,
        """
catalog: {from_definitions: true, tools: [{name: a}]}
expect:
  - when: {prefix: "w"}
    call: [{tool: get_weather}]
""",
    )
    defs = (
        {"type": "function", "name": "get_weather", "parameters": {"type": "object", "required": ["city"]}},
        {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}},
    )
    v = judge.judge(Turn("w oslo", (call("get_weather", {"city": "Oslo"}),), tool_definitions=defs))
    assert v.calls[0].outcome.value == "correct" and v.calls[0].schema_valid is True
    v = judge.judge(Turn("w oslo", (call("get_weather", {}),), tool_definitions=defs))
    assert v.calls[0].schema_valid is False
    v = judge.judge(Turn("w oslo", (call("get_time"),), tool_definitions=defs))
    assert v.calls[0].outcome.value == "wrong_tool"
    v = judge.judge(Turn("w oslo", (call("get_weather"),)))  # nothing offered: not in the catalog
    assert v.calls[0].outcome.value == "hallucinated"
    # An offered schema whose $ref points nowhere cannot be checked: the call is judged without a schema.
    # So can one with a regex RE2 cannot run (the judge runs schema regexes in RE2: linear time).
    for bad in ({"$ref": "#/$defs/gone"}, {"pattern": "^(?!x)"}):
        offered = ({"name": "get_weather", "parameters": {"properties": {"city": bad}}},)
        v = judge.judge(Turn("w oslo", (call("get_weather", {"city": "Oslo"}),), tool_definitions=offered))
        assert (v.calls[0].outcome.value, v.calls[0].schema_valid, v.end_to_end) == ("correct", None, True)
    assert judge.catalog == frozenset({"a"})


_W_CITY = {"name": "w", "parameters": {"required": ["city"]}}
_W_DAY = {"name": "w", "parameters": {"required": ["day"]}}


@pytest.mark.parametrize(
    ("defs", "valid"),
    [
        ([_W_CITY, _W_DAY], True),
        ([_W_DAY, _W_CITY], False),
        ([{"name": "w"}, _W_DAY], None),
    ],
)
def test_of_two_offered_definitions_of_a_name_the_first_wins(
    tmp_path: Path, defs: list[dict[str, object]], valid: bool | None
) -> None:
    """rules/README.md: the offered tools count "one per tool name, the first wins". Turn assembly keeps the turn
    span's own definitions as given, so a name can come twice; the judge checked the call against the last definition
    that had a schema (a later one replaced an earlier schema, and filled in for a first definition without one)."""
    judge = judge_for(tmp_path, """
catalog: {from_definitions: true, tools: [{name: a}]}
expect:
  - when: {prefix: "w"}
    call: [{tool: w}]
""")
    t = Turn("w oslo", (call("w", {"city": "Oslo"}),), tool_definitions=tuple(defs))
    for v in (judge.judge(t), judge._general(t)):
        assert (v.calls[0].outcome.value, v.calls[0].schema_valid) == ("correct", valid)


@pytest.mark.parametrize(
    "definition",
    [
        {"name": "get_weather", "input_schema": {"type": "object", "required": ["city"]}},  # Anthropic's tools
        {"name": "get_weather", "inputSchema": {"type": "object", "required": ["city"]}},  # MCP's tools
        {"name": "get_weather", "inputSchema": {"json": {"type": "object", "required": ["city"]}}},  # Bedrock, Strands
    ],
)
def test_an_offered_schema_is_read_in_the_providers_shapes(tmp_path: Path, definition: dict[str, object]) -> None:
    """`gen_ai.tool.definitions` holds the provider's own tool format: a schema under `input_schema` or `inputSchema`
    (Bedrock's wrapped in `json`) checks the calls as one under `parameters` does."""
    judge = judge_for(tmp_path, """
catalog: {from_definitions: true, tools: [{name: a}]}
expect:
  - when: {prefix: "w"}
    call: [{tool: get_weather}]
""")
    offered = (definition,)
    v = judge.judge(Turn("w oslo", (call("get_weather", {"city": "Oslo"}),), tool_definitions=offered))
    assert (v.calls[0].outcome.value, v.calls[0].schema_valid) == ("correct", True)
    v = judge.judge(Turn("w oslo", (call("get_weather", {}),), tool_definitions=offered))
    assert (v.calls[0].outcome.value, v.calls[0].schema_valid) == ("correct", False)
    assert [x.kind.value for x in v.calls[0].violations] == ["required"]


def _nested(levels: int, leaf: dict[str, object]) -> dict[str, object]:
    for _ in range(levels):
        leaf = {"type": "object", "properties": {"x": leaf}}
    return leaf


@pytest.mark.parametrize("levels", [100, 800])
def test_an_offered_schema_nested_too_deeply_is_not_used_and_the_turn_is_judged(tmp_path: Path, levels: int) -> None:
    """An offered schema 100 `properties` levels deep raised RecursionError out of Judge.judge (the metaschema check
    recurses; 800 levels already in the cache key's json.dumps): serve dropped the turn as a judge error, replay
    and eval stopped with a traceback. Like any offered schema the judge cannot check, it is not used."""
    judge = judge_for(tmp_path, """
catalog: {from_definitions: true, tools: [{name: a}]}
expect:
  - when: {prefix: "w"}
    call: [{tool: get_weather}]
""")
    offered = ({"name": "get_weather", "parameters": _nested(levels, {"type": "string"})},)
    t = Turn("w oslo", (call("get_weather", {"x": "Oslo"}),), tool_definitions=offered)
    for v in (judge.judge(t), judge.judge(t), judge._general(t)):
        assert (v.calls[0].outcome.value, v.calls[0].schema_valid, v.end_to_end) == ("correct", None, True)


@pytest.mark.parametrize("offered", [False, True])
def test_arguments_too_deep_for_a_recursive_schema_fail_it_without_raising(tmp_path: Path, offered: bool) -> None:
    """A recursive schema (`$ref: "#"`, declared or offered) and arguments 900 levels deep that it rejects: the
    reference validator, which lists the violations, raised RecursionError out of Judge.judge. The arguments
    fail the schema with one violation saying why they could not be checked further."""
    schema = {"type": "object", "properties": {"x": {"$ref": "#"}}, "additionalProperties": False}
    declared = "" if offered else f", schema: {json.dumps(schema)}"
    judge = judge_for(tmp_path, f"""
catalog: {{from_definitions: {str(offered).lower()}, tools: [{{name: get_weather{declared}}}]}}
expect:
  - when: {{prefix: "w"}}
    call: [{{tool: get_weather}}]
""")
    defs = ({"name": "get_weather", "parameters": schema},) if offered else None
    args: dict[str, object] = {"y": 1}  # the innermost level has a property the schema does not allow
    for _ in range(900):
        args = {"x": args}
    shallow = {"x": {"x": {"y": 1}}}
    for v in (judge.judge(Turn("w", (call("get_weather", shallow),), tool_definitions=defs)),):
        assert v.calls[0].schema_valid is False and v.calls[0].violations[0].kind.value == "additional"
    t = Turn("w oslo", (call("get_weather", args),), tool_definitions=defs)
    for v in (judge.judge(t), judge._general(t)):
        c = v.calls[0]
        assert (c.outcome.value, c.schema_valid) == ("correct", False)
        assert [(x.kind.value, x.message) for x in c.violations] == [
            ("other", "the arguments are nested too deeply to check against the schema")]


def test_an_agent_offering_more_tools_than_256_keeps_its_validators(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The offered schemas' validators were cached 256 at most, least recently used first out: an agent offering
    257 tools on every turn evicted each validator just before its next use, so every turn built all of them again
    (2 ms a turn at 250 tools, 324 ms at 257, 1.4 s at 1,000). The cache holds 4,096 schemas, within 16 MiB of
    their JSON; a schema past the bytes is used, not kept."""
    from monitor.judge import _catalog
    from monitor.judge._schema import SchemaValidator

    built: list[object] = []

    class Counted(SchemaValidator):
        __slots__ = ()

        def __init__(self, schema: Any) -> None:
            built.append(schema)
            super().__init__(schema)

    monkeypatch.setattr(_catalog, "SchemaValidator", Counted)
    judge = judge_for(tmp_path, "catalog: {from_definitions: true, tools: [{name: a}]}\n")
    defs = tuple({"name": f"t{i}", "parameters": {"type": "object", "properties": {"q": {"maxLength": i + 1}}}}
                 for i in range(300))
    t = Turn("w", (call("t299", {"q": "x" * 301}),), tool_definitions=defs)
    assert judge.judge(t).calls[0].schema_valid is False
    assert len(built) == 300
    assert judge.judge(t).calls[0].schema_valid is False
    assert len(built) == 300  # none built again
    assert _catalog.MAX_CACHED_DEFINITION_SCHEMAS == 4096 and _catalog.MAX_CACHED_DEFINITION_BYTES == 16 << 20
    big = {"type": "object", "properties": {"p1": {"description": "d" * (16 << 20)}}}
    big_t = Turn("w", (call("big", {"p1": 1}),), tool_definitions=({"name": "big", "parameters": big},))
    for _ in range(2):
        assert judge.judge(big_t).calls[0].schema_valid is True
    assert len(built) == 302  # over the bytes: built for each turn, and the 300 others are still kept
    judge.judge(t)
    assert len(built) == 302


def test_agent_scoping_across_files() -> None:
    judge = Judge(load_rules([RULES / f for f in ("incident-triage.yaml", "customer-support.yaml", "travel.yaml")]))
    assert judge.agents == frozenset({"incident-triage", "customer-support", "travel"})
    weather = call("get_weather", {"city": "Oslo"})
    assert judge.judge(turn("weather in Oslo?", weather, agent="travel")).selection_ok
    # The triage agent's own catalog does not hold get_weather.
    v = judge.judge(turn("[AUTH] weather in Oslo?", weather, agent="incident-triage"))
    assert v.rule == "auth" and v.calls[0].outcome.value == "hallucinated"
    # A turn of an agent no file names: no scoped rules apply.
    assert not judge.judge(turn("[AUTH] x", "pull_auth_telemetry", agent="other")).judged
    # ... but the whole catalog does (rules/README.md, "Several files"): a scoped file's tool is known, not made up.
    v = judge.judge(turn("weather in Oslo?", "get_order_status", agent="other"))
    assert [c.outcome.value for c in v.calls] == ["unjudged"]
    # A turn without an agent name: every rule applies.
    assert judge.judge(turn("[AUTH] x", call("pull_auth_telemetry", {"log_excerpt": "x"}))).rule == "auth"


def test_a_scoped_files_cases_do_not_apply_to_an_agent_no_file_names(tmp_path: Path) -> None:
    scoped = write(
        tmp_path,
        "agent: alpha\ncatalog: {tools: [{name: t}]}\ncases:\n  - {id: c1, input: hello, call: [{tool: t}]}\n",
        "alpha.yaml",
    )
    shared = write(
        tmp_path,
        "catalog: {tools: [{name: u}]}\nexpect:\n  - {id: ru, call: [{tool: u}]}\n"
        "cases:\n  - {id: c2, input: hi, call: [{tool: u}]}\n",
        "shared.yaml",
    )
    judge = Judge(load_rules([scoped, shared]))
    # Agent "other": only the unscoped file applies, as for its rules (c1's id does not hide c2's input).
    for t, rule in ((Turn("hello", (call("u"),), agent="other"), "ru"),
                    (Turn("hi", (call("u"),), agent="other", case_id="c1"), "case:c2")):  # fmt: skip
        v = judge.judge(t)
        assert (v.rule, v.calls[0].outcome.value, v.end_to_end) == (rule, "correct", True)
    assert judge.judge(Turn("hello", (call("u"),), agent="alpha")).rule == "case:c1"
    assert judge.judge(Turn("hello", (call("u"),))).rule == "case:c1"  # no agent name: every file applies


def test_each_agent_finds_its_own_case_of_an_input_other_agents_label_too(tmp_path: Path) -> None:
    files = [
        write(tmp_path, f"agent: {a}\ncatalog: {{tools: [{{name: {t}}}]}}\ncases:\n  - {{input: hello, none: true}}\n"
              f"  - {{input: order 7, call: [{{tool: {t}}}]}}\n", f"{a}.yaml")
        for a, t in (("alpha", "t"), ("beta", "u"))
    ]  # fmt: skip
    judge = Judge(load_rules(files))
    for agent, tool in (("alpha", "t"), ("beta", "u")):
        v = judge.judge(Turn("order 7", (call(tool),), agent=agent))
        assert (v.rule, v.end_to_end) == (f"case:{agent}:2", True)
        assert judge.judge(Turn("hello", agent=agent)).rule == f"case:{agent}:1"
    assert judge.judge(Turn("order 7", (call("t"),))).rule == "case:alpha:2"  # no agent: the first case of the input


@pytest.mark.parametrize(
    ("text", "calls", "rule", "ok"),
    [
        ("hello!", [], "small-talk", True),
        ("Thanks", ["get_order_status"], "small-talk", False),
        ("Where is my order AB-12345?", [("get_order_status", {"order_id": "AB-12345"})], "order-status", True),
        ("Where is my order AB-12345?", [("get_order_status", {"order_id": "AB-99999"})], "order-status", False),
        ("When will AB-12345 arrive?", [("get_shipping_eta", {"order_id": "AB-12345"})], "shipping-eta", True),
        ("When will AB-12345 arrive?", [("get_order_status", {"order_id": "AB-12345"})], "shipping-eta", False),
        ("Order history for user u42", [("get_order_history", {"user_id": "u42"})], "order-history", True),
    ],
)
def test_customer_support_rules(text: str, calls: list[object], rule: str, ok: bool) -> None:
    judge = Judge(load_rules([RULES / "customer-support.yaml"]))
    built = [c if isinstance(c, str) else call(c[0], c[1]) for c in calls]  # type: ignore[index]
    v = judge.judge(turn(text, *built, agent="customer-support"))
    assert v.rule == rule and v.end_to_end is ok


@pytest.mark.parametrize(
    ("text", "args", "ok"),
    [
        ("What's the weather in Oslo?", {"city": "Oslo"}, True),
        ("What's the weather in Oslo?", {"city": "Oslo", "unit": "celsius"}, True),
        ("What's the weather in Oslo?", {"city": "Bergen"}, False),
        ("Weather in Austin in fahrenheit?", {"city": "Austin", "unit": "fahrenheit"}, True),
        ("Weather in Austin in fahrenheit?", {"city": "Austin"}, False),
        ("How hot is it in Zürich today?", {"city": "Zürich"}, True),
        ("Forecast in São Paulo?", {"city": "São Paulo"}, True),
        ("Forecast in São Paulo?", {"city": "Sao Paulo"}, False),
    ],
)
def test_travel_rules(text: str, args: dict[str, str], ok: bool) -> None:
    judge = Judge(load_rules([RULES / "travel.yaml"]))
    v = judge.judge(turn(text, call("get_weather", args), agent="travel", output_text="It is 12 °C"))
    assert v.selection_ok and v.args_ok is ok
    assert judge.judge(turn("Hello!", agent="travel")).selection_ok


def test_router_falls_back_when_regexes_do_not_fit_one_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from monitor.judge import _router
    from monitor.rules._regex import regex_set

    def refuse_many(patterns: list[str]) -> object:
        if len(patterns) > 1:  # what RE2 does when the combined automaton exceeds its memory budget
            raise ValueError("cannot combine")
        return regex_set(patterns)

    monkeypatch.setattr(_router, "regex_set", refuse_many)
    judge = judge_for(tmp_path, ROUTING)
    for text, rule in (("[AUTH] Disk full", "r-regex"), ("db timeout", "r-contains"), ("a VIP", "r-any")):
        exp = judge.expectation(Turn(text))
        assert exp is not None and exp.id == rule


@pytest.mark.parametrize("reserved", ["(none)", "(unknown)"])
def test_an_offered_tool_named_as_a_reserved_matrix_label_is_a_made_up_name(tmp_path: Path, reserved: str) -> None:
    """The confusion matrix keeps `(none)` for a turn without a call and `(unknown)` for a made-up name. An agent
    offering a tool of either name (rule files cannot declare one) made its call land in those cells: a spurious
    call of an offered `(none)` counted as a turn that called nothing. Such an offered name joins no catalog: a call
    of it is a made-up name."""
    judge = judge_for(tmp_path, """
catalog: {from_definitions: true, tools: [{name: a}]}
expect:
  - when: {prefix: "n"}
    none: true
  - when: {prefix: "w"}
    call: [{tool: a}]
""")
    offered = ({"type": "function", "name": reserved, "parameters": {"type": "object"}},)
    v = judge.judge(Turn("n x", (call(reserved),), tool_definitions=offered))
    assert v.calls[0].outcome.value == "hallucinated"
    assert v.confusion == (("(none)", "(unknown)"),)
    v = judge.judge(Turn("w x", (call(reserved),), tool_definitions=offered))
    assert v.calls[0].outcome.value == "hallucinated"
    assert v.confusion == (("a", "(unknown)"),)
