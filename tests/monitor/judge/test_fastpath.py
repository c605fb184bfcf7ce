"""The judge's plans (the fast path of turns with no call or one call) give the general path's verdicts.

Two judges per rule set: `judge` (plans, then the general path) and a second one asked only through
`_general`; their verdicts must be equal in every field, on generated turns and on the bench workload's turns.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from monitor.judge import Judge, _judge
from monitor.records import ToolCall, Turn
from monitor.rules import load_rules
from monitor.rules._model import All, Condition, Contains, Equals, Prefix
from monitor.verdict import TurnVerdict
from tests.monitor.judge.helpers import BASE_RULES, REPO, RULES, write

SHIPPED = sorted(RULES.glob("*.yaml"))
INPUTS = [  # inputs for the regex-routed rules of the shipped files
    "When will order AB-12345 arrive?",
    "Where is my order AB-1234?",
    "what did user u-42 order before? history please",
    "hello!",
    "  thanks",
    "is it hot in Rome? in fahrenheit",
    "weather in Oslo",
    "[AUTH]",
    "",
]
OUTPUTS = [None, "", "Result: ok", "checked\nResult: escalate", "Result:  ", "no result", "It is 20 °C", "68 F"]


class CountingJudge(Judge):
    """A judge that counts the turns its plans did not settle."""

    general_turns = 0

    def _general(self, turn: Turn) -> TurnVerdict:
        self.general_turns += 1
        return super()._general(turn)


def _triggers(c: Condition) -> list[str]:
    if isinstance(c, Prefix | Equals):
        return [c.text]
    if isinstance(c, Contains):
        return ["see " + c.text]
    if isinstance(c, All):
        return [t for p in c.parts for t in _triggers(p)]
    return []


def _vocabulary(judge: Judge) -> tuple[list[str], list[str], list[str]]:
    """(inputs, tool names, argument names) worth generating for a judge's rules."""
    exps = judge.ruleset.expectations
    inputs = sorted({t for e in exps for t in _triggers(e.when)}) + INPUTS
    names = sorted(judge.catalog) + ["made_up_tool", "pull_payment_telemetry", ""]
    args = sorted({c.argument for e in exps for a in e.alternatives for s in a.slots for c in s.checks})
    return inputs, names, args + ["x", "log_excerpt", "window_minutes"]


VALUES = st.one_of(
    st.sampled_from(["", " ", "\t\n", "\x0b", " \x1c ", "AB-12345", "ab-1", "u-42", "x", "é", "\ud800", "1", "2"]),
    st.text(max_size=12),
    st.integers(-3, 3),
    st.booleans(),
    st.none(),
    st.lists(st.integers(0, 2), max_size=2),
)


@st.composite
def _arguments(draw: Any, arg_names: list[str]) -> str | None:
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return None  # not captured
    if kind == 1:
        bad: str = draw(st.sampled_from(["{", '{"x": 1', "nope", "", " {}", "{} ", "[]", "[1]", '"s"', "1", "null"]))
        return bad
    if kind == 2:
        return "[" * 5000 + "]" * 5000  # nested too deeply
    keys = draw(st.lists(st.sampled_from(arg_names), max_size=3, unique=True))
    obj = {k: draw(VALUES) for k in keys}
    return json.dumps(obj, ensure_ascii=draw(st.booleans()))


@st.composite
def _turns(draw: Any, judge: Judge) -> Turn:
    inputs, names, arg_names = _vocabulary(judge)
    head = draw(st.sampled_from(inputs))
    text = draw(st.sampled_from(["", " ", "\t"])) + head + draw(st.sampled_from(["", " x", " AB-123456 arrive"]))
    n = draw(st.sampled_from([0, 1, 1, 1, 1, 2, 3]))
    calls = tuple(
        ToolCall(draw(st.sampled_from(names)), call_id=f"c{i}", arguments=draw(_arguments(arg_names))) for i in range(n)
    )
    agent = draw(st.sampled_from(["", "incident-triage", "someone-else", *sorted(judge.agents)]))
    output = draw(st.one_of(st.sampled_from(OUTPUTS), st.text(max_size=20)))
    return Turn(
        text,
        calls,
        agent=agent,
        trace_id="t",
        span_id="s",
        output_text=output,
        turnless=draw(st.integers(0, 19)) == 0,
    )


def _pair(paths: list[Path]) -> tuple[Judge, Judge]:
    rules = load_rules(paths)
    return Judge(rules), Judge(rules)


@pytest.mark.parametrize("files", [[p] for p in SHIPPED] + [SHIPPED], ids=lambda f: "+".join(p.stem for p in f))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_plans_agree_with_the_general_path_on_shipped_rules(files: list[Path], data: st.DataObject) -> None:
    if tuple(files) not in _JUDGES:
        _JUDGES[tuple(files)] = _pair(files)
    fast, general = _JUDGES[tuple(files)]
    turn = data.draw(_turns(fast))
    assert fast.judge(turn) == general._general(turn)
    assert fast.judge(turn) == general._general(turn)  # the second time from the cached plan


_JUDGES: dict[tuple[Path, ...], tuple[Judge, Judge]] = {}


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_plans_agree_with_the_general_path_on_every_shape(data: st.DataObject, tmp_path_factory: Any) -> None:
    key = (Path("BASE"),)
    if key not in _JUDGES:
        _JUDGES[key] = _pair([write(tmp_path_factory.mktemp("base"), BASE_RULES)])
    fast, general = _JUDGES[key]
    turn = data.draw(_turns(fast))
    assert fast.judge(turn) == general._general(turn)


def _bench_turns() -> list[Turn]:
    """The bench workload's turns (the instrumented triage agent), built the way bench_stages builds them."""
    sys.path.insert(0, str(REPO / "bench"))
    try:
        from bench_serve import base_batches, retraced
    finally:
        sys.path.remove(str(REPO / "bench"))
    from monitor.assembly import TurnAssembler
    from monitor.normalize import Normalizer
    from monitor.otlp import parse_protobuf

    normalizer = Normalizer()
    asm = TurnAssembler(grace_s=0, max_pending=10**7)
    out: list[Turn] = []
    for req in base_batches(4 * 512):
        out.extend(asm.add_records(normalizer.split(parse_protobuf(retraced(req, 0)).spans)[0], 2**62))
    out.extend(asm.flush())
    return out


def test_plans_agree_with_the_general_path_on_the_bench_workload() -> None:
    rules = load_rules([RULES / "incident-triage.yaml"])
    fast, general = CountingJudge(rules), Judge(rules)
    turns = _bench_turns()
    assert len(turns) > 1000
    for t in turns:
        assert fast.judge(t) == general._general(t)
    assert fast.general_turns < len(turns) * 0.1  # the plans settle the common turn


def test_plan_caches_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_judge, "MAX_CACHE", 4)
    fast, general = _pair([write(tmp_path, BASE_RULES)])
    for k in range(10):
        t = Turn("[A] go", (ToolCall(f"tool_{k}", arguments="{}"),), output_text="ok")
        assert fast.judge(t) == general._general(t)
        held = sum(len(d) for s in (fast._all, fast._other, *fast._scopes.values()) for d in s.plans or ())
        assert held == fast._plan_count <= 4
    before = fast._plan_count
    long = Turn("[A] go", (ToolCall("n" * (_judge.MAX_CACHED_NAME_CHARS + 1), arguments="{}"),))
    assert fast.judge(long) == general._general(long)
    assert fast._plan_count == before  # names beyond the cacheable length are not kept


def test_labelled_cases_take_the_general_path(tmp_path: Path) -> None:
    text = BASE_RULES + "cases:\n  - id: c1\n    input: hello\n    call: [{tool: b}]\n"
    fast, general = _pair([write(tmp_path, text)])
    assert fast._all.plans is None
    t = Turn("hello", (ToolCall("b", arguments="{}"),))
    assert fast.judge(t) == general._general(t)
    assert fast.judge(t).rule == "case:c1"


CLASS_RULES = "version: 1\ncatalog:\n  tools:\n    - name: a\nexpect:\n" + "".join(
    f"  - id: C{k}\n    when: {{prefix: \"[C{k}]\"}}\n    call: [{{tool: a, args: {{s: {{regex: '{p}'}}}}}}]\n"
    for k, p in enumerate([r"\S", r"\s", r"\w", r"\W", r"\d", r"\D", r"\S+x"])
)


def test_one_character_classes_answer_as_re2(tmp_path: Path) -> None:
    """Regex checks of one character class answer ASCII values without RE2: every ASCII character, alone
    and among others, is judged as RE2 judges it."""
    fast, general = _pair([write(tmp_path, CLASS_RULES)])
    values = [chr(b) for b in range(128)] + ["", "  ", "\t\x0b\x0c", "é", " \u00a0", "\u2003", "a\ud800", "\ud800"]
    values += [f" {chr(b)}\n" for b in range(128)]
    for k in range(7):
        for v in values:
            t = Turn(f"[C{k}] q", (ToolCall("a", arguments=json.dumps({"s": v})),))
            assert fast.judge(t) == general._general(t), (k, v)


@settings(max_examples=200, deadline=None)
@given(value=st.text(max_size=8), tag=st.sampled_from(["AUTH", "BILL", "RISK"]))
def test_telemetry_excerpts_agree(value: str, tag: str) -> None:
    key = (RULES / "incident-triage.yaml",)
    if key not in _JUDGES:
        _JUDGES[key] = _pair(list(key))
    fast, general = _JUDGES[key]
    tool = {"AUTH": "pull_auth_telemetry", "BILL": "pull_billing_telemetry", "RISK": "pull_risk_telemetry"}[tag]
    args = json.dumps({"log_excerpt": value})
    t = Turn(f"[{tag}] {value}", (ToolCall(tool, arguments=args),), agent="incident-triage", output_text=value)
    assert fast.judge(t) == general._general(t)


@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_assignments_cached_by_their_scores_agree_with_fresh_ones(data: st.DataObject, tmp_path_factory: Any) -> None:
    """When argument scores decide the assignment (two calls of a tool for one slot with checks, ...), the judge
    keeps the result per scores read: a judge that has seen many turns gives what one with empty caches gives."""
    key = (Path("SCORED"),)
    if key not in _JUDGES:
        files = [write(tmp_path_factory.mktemp("scored"), BASE_RULES), *SHIPPED]
        _JUDGES[key] = _pair(files)
    warm, cold = _JUDGES[key]
    turn = data.draw(_turns(warm))
    first = turn.calls[0] if turn.calls else ToolCall(data.draw(st.sampled_from(_vocabulary(warm)[1])))
    more = data.draw(st.sampled_from([(), (ToolCall("extra"),), turn.calls[1:]]))
    turn = replace(turn, calls=(first, replace(first, call_id="c9"), *more))  # a double call, as agents make them
    _, _, arg_names = _vocabulary(warm)
    for _ in range(4):  # the same names with other arguments: other scores, maybe another assignment
        calls = tuple(replace(c, arguments=data.draw(_arguments(arg_names))) for c in turn.calls)
        variant = replace(turn, calls=calls)
        cold._outcome_cache.clear()
        cold._scored_cache.clear()
        assert warm._general(variant) == cold._general(variant)


def test_assignments_by_scores_are_cached_and_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    judge = Judge(load_rules([RULES / "incident-triage.yaml"]))
    good, bad = '{"log_excerpt": "x"}', '{"log_excerpt": " "}'
    turns = [
        Turn("[AUTH] x", (ToolCall("pull_auth_telemetry", arguments=a), ToolCall("pull_auth_telemetry", arguments=b)),
             agent="incident-triage")
        for a, b in ((good, bad), (bad, good), (good, good))
    ]  # fmt: skip
    first = [judge._general(t) for t in turns]
    (scored,) = judge._scored_cache.values()
    assert len(scored.results) == 3  # one per answer: which call passes its check decides which one is correct
    assert [v.calls[0].outcome.value for v in first] == ["correct", "spurious", "correct"]
    assert [judge._general(t) for t in turns] == first
    monkeypatch.setattr(_judge, "MAX_CACHE", 2)
    judge._scored_cache.clear()
    judge._scored_count = 0
    for t in turns:
        judge._general(t)
        assert judge._scored_count <= 2
