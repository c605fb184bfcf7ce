"""hypothesis properties of the judge and the tally."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from monitor.judge import Judge, Tally
from monitor.judge._conditions import holds
from monitor.judge._router import Router
from monitor.records import ToolCall, Turn
from monitor.rules import load_rules
from monitor.verdict import Outcome, TurnVerdict
from tests.monitor.judge.helpers import BASE_RULES, call, write

PREFIXES = ["[A]", "[AB]", "[A2]", "[AMIN]", "[NONE]", "[ANY]", "[OPT]", "[ARG2]", "[ARG1]", "[MINFIRST]", "nothing"]
NAMES = ["a", "b", "c", "d", "zzz"]
CAPACITY = {"[A]": 1, "[AB]": 2, "[A2]": 2, "[AMIN]": None, "[NONE]": 0, "[ANY]": 2, "[OPT]": 2}
CAPACITY |= {"[ARG2]": 2, "[ARG1]": 1, "[MINFIRST]": 2}

EXAMPLES = int(os.environ.get("TOOLWATCH_HYPOTHESIS_EXAMPLES", "150"))  # raise for a deeper local run
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def judge(tmp_path_factory: pytest.TempPathFactory) -> Judge:
    return Judge(load_rules([write(Path(tmp_path_factory.mktemp("p")), BASE_RULES)]))


arguments = st.one_of(
    st.none(),
    st.just("{bad json"),
    st.builds(lambda x: {"x": x}, st.integers(0, 3)),
    st.builds(lambda s: {"s": s}, st.text(max_size=3)),
)
calls = st.lists(st.builds(lambda n, a: call(n, a), st.sampled_from(NAMES), arguments), max_size=6)
turns = st.builds(lambda p, cs: Turn(p + " body", tuple(cs)), st.sampled_from(PREFIXES), calls)


def summary(v: TurnVerdict) -> tuple[Any, ...]:
    """What must not depend on the order of parallel calls."""
    return (
        Counter(c.outcome for c in v.calls),
        Counter((c.name, c.outcome) for c in v.calls if c.outcome in (Outcome.CORRECT, Outcome.HALLUCINATED)),
        Counter(m.tool for m in v.missed),
        sum(1 for c in v.calls if c.args_ok),
        v.selection_ok,
        v.args_ok,
        v.schema_ok,
        v.end_to_end,
        v.over_calling,
        v.expected_calls,
        v.rule,
        len(v.confusion),
    )


@SETTINGS
@given(turns)
def test_outcomes_partition_the_calls(judge: Judge, t: Turn) -> None:
    v = judge.judge(t)
    assert len(v.calls) == len(t.calls)
    assert [c.index for c in v.calls] == list(range(len(t.calls)))
    counts = Counter(c.outcome for c in v.calls)
    assert sum(counts.values()) == len(t.calls)
    if v.judged:
        assert counts[Outcome.UNJUDGED] == 0
        assert all((c.slot is not None) == (c.outcome is Outcome.CORRECT) for c in v.calls)
        # Every catalog call and every missing unit appears in the confusion matrix exactly once.
        catalog_calls = sum(1 for c in v.calls if c.in_catalog)
        pairs = len(v.confusion)
        assert pairs >= catalog_calls and pairs <= catalog_calls + counts[Outcome.HALLUCINATED] + len(v.missed) + 1
        assert counts[Outcome.WRONG_TOOL] <= len(v.missed)
        assert v.selection_ok == (len(v.missed) == 0 and counts[Outcome.CORRECT] == len(v.calls))
    else:
        assert set(counts) <= {Outcome.UNJUDGED, Outcome.HALLUCINATED}
    assert all((c.outcome is Outcome.HALLUCINATED) == (not c.in_catalog) for c in v.calls)


@SETTINGS
@given(st.lists(turns, max_size=12))
def test_every_ratio_lies_in_0_1(judge: Judge, ts: list[Turn]) -> None:
    tally = Tally()
    for t in ts:
        tally.add(judge.judge(t))
    for name, value in tally.ratios().items():
        assert value is None or 0.0 <= value <= 1.0, name
    for tool in tally.per_tool:
        for value in tally.tool_ratios(tool).values():
            assert value is None or 0.0 <= value <= 1.0
        for value in tally.precision_recall_f1(tool):
            assert value is None or 0.0 <= value <= 1.0
    if tally.judged_calls == 0:
        assert tally.ratios()["tool_call_accuracy"] is None


@SETTINGS
@given(turns, st.randoms(use_true_random=False))
def test_permuting_parallel_calls_never_changes_the_verdict(judge: Judge, t: Turn, rnd: Any) -> None:
    shuffled = list(t.calls)
    rnd.shuffle(shuffled)
    assert summary(judge.judge(t)) == summary(judge.judge(Turn(t.input_text, tuple(shuffled))))


@SETTINGS
@given(turns, st.sampled_from(NAMES), arguments)
def test_adding_a_call_never_increases_correct_calls_beyond_the_slots(
    judge: Judge, t: Turn, name: str, args: Any
) -> None:
    before = judge.judge(t)
    after = judge.judge(Turn(t.input_text, (*t.calls, call(name, args))))
    ok_before = sum(1 for c in before.calls if c.outcome is Outcome.CORRECT)
    ok_after = sum(1 for c in after.calls if c.outcome is Outcome.CORRECT)
    capacity = CAPACITY.get(t.input_text.split()[0])
    if capacity is not None:
        assert ok_before <= capacity and ok_after <= capacity
    assert ok_before <= ok_after <= ok_before + 1


# ---- routing equals a linear first-match scan ----

TRIGGERS = st.one_of(
    st.builds(lambda s: {"prefix": s}, st.sampled_from(["[A]", "[A", "x", "[B]", "ab"])),
    st.builds(lambda s: {"contains": s}, st.sampled_from(["err", "B]", "a"])),
    st.builds(lambda s: {"regex": s}, st.sampled_from(["^x", "[0-9]+", "b$", "(?i)ERR"])),
    st.builds(lambda s: {"equals": s}, st.sampled_from(["x", "[A] err"])),
    st.builds(lambda s: {"attribute": {"key": "k", "equals": s}}, st.sampled_from(["1", "2"])),
)
CONDITIONS = st.recursive(
    TRIGGERS,
    lambda inner: st.one_of(
        st.builds(lambda xs: {"all": xs}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda xs: {"any": xs}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda x: {"not": x}, inner),
    ),
    max_leaves=4,
)
INPUTS = st.sampled_from(["[A] err", "[A]", "x", "ab 12", "[B] bee", "  [A] ERR", "", "b", "zzz a"])


@settings(max_examples=120, deadline=None)
@given(st.lists(CONDITIONS, min_size=1, max_size=12), st.lists(st.tuples(INPUTS, st.sampled_from(["1", "2", ""]))))
def test_router_equals_a_linear_scan(conditions: list[dict[str, Any]], inputs: list[tuple[str, str]]) -> None:
    import json
    import tempfile

    rules = {"catalog": {"tools": [{"name": "t"}]}, "expect": [{"when": c, "none": True} for c in conditions]}
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "r.yaml"
        path.write_text(json.dumps(rules))
        rs = load_rules([path])
    router = Router(rs.expectations)
    for text, k in inputs:
        t = Turn(text, attributes={"k": k} if k else {})
        linear = next((e for e in rs.expectations if holds(e.when, t)), None)
        assert router.route(t) is linear


def test_turns_from_real_calls_stay_stable(judge: Judge) -> None:
    t = Turn("[AB] x", (ToolCall("b", arguments="{}"), ToolCall("a", arguments="{}")))
    assert judge.judge(t) == judge.judge(t)


@SETTINGS
@given(st.lists(turns, max_size=10), st.integers(0, 10))
def test_tally_merge_and_subtract_are_exact(judge: Judge, ts: list[Turn], cut: int) -> None:
    verdicts = [judge.judge(t) for t in ts]
    whole, head, tail = Tally(), Tally(), Tally()
    for i, v in enumerate(verdicts):
        whole.add(v)
        (head if i < cut else tail).add(v)
    merged = head.copy()
    merged.merge(tail)
    assert merged.ratios() == whole.ratios()
    assert merged.confusion == whole.confusion and merged.per_tool.keys() == whole.per_tool.keys()
    merged.subtract(tail)
    assert merged.ratios() == head.ratios() and merged.confusion == head.confusion


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.sampled_from(["[A]", "[A", "[AB]", "[", "x", "[A][B]", "xy"]), min_size=1, max_size=8),
    st.lists(st.sampled_from(["[A] e", "[AB] e", "[A][B] e", "  [A", "xy z", "x", "", "[", "q"]), max_size=8),
)
def test_prefix_table_equals_a_linear_scan(prefixes: list[str], inputs: list[str]) -> None:
    import json
    import tempfile

    rules = {"catalog": {"tools": [{"name": "t"}]}, "expect": [{"when": {"prefix": p}, "none": True} for p in prefixes]}
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "r.yaml"
        path.write_text(json.dumps(rules))
        rs = load_rules([path])
    router = Router(rs.expectations)
    for text in inputs:
        t = Turn(text)
        assert router.route(t) is next((e for e in rs.expectations if holds(e.when, t)), None)
