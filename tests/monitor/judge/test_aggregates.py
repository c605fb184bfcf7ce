"""Every aggregate figure of METRICS.md over a hand-computed set of turns, zero denominators, the
confusion matrix with per-tool precision / recall / F1, and Tally arithmetic."""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.judge import FIGURES, Judge, Tally
from monitor.records import Turn
from monitor.verdict import NONE_LABEL, UNKNOWN_LABEL
from tests.monitor.judge.helpers import call, judge_for, turn

RULES = """
catalog:
  tools:
    - {name: a, schema: {type: object, properties: {x: {type: integer}}}}
    - {name: b, schema: {type: object}}
    - {name: c}
expect:
  - id: A
    when: {prefix: "[A]"}
    call: [{tool: a, args: {x: 1}}]
    respond: [{contains: "Result:"}]
  - id: SEQ
    when: {prefix: "[SEQ]"}
    call: [{tool: a}, {tool: b}]
    order: [[a, b]]
  - id: NONE
    when: {prefix: "[NONE]"}
    none: true
"""


def scenario() -> list[Turn]:
    return [
        turn("[A] 1", call("a", {"x": 1}), output_text="Result: ok"),
        turn("[A] 2", call("a", {"x": 2}), output_text="nope"),
        turn("[A] 3", call("b", {})),
        turn("[SEQ] 4", call("b", {}), call("a", {})),
        turn("[SEQ] 5", call("a", {"x": "s"}), call("b", {})),
        turn("[NONE] 6"),
        turn("[NONE] 7", "c", "zzz"),
        turn("hello 8", call("a", {})),
        turn("lost 9", "zzz", turnless=True),
    ]


@pytest.fixture(scope="module")
def tally(tmp_path_factory: pytest.TempPathFactory) -> Tally:
    judge = judge_for(Path(tmp_path_factory.mktemp("agg")), RULES)
    t = Tally()
    for x in scenario():
        t.add(judge.judge(x))
    return t


@pytest.mark.parametrize(
    ("figure", "expected"),
    [
        ("tool_call_accuracy", 6 / 9),
        ("spurious_rate", 1 / 9),
        ("wrong_tool_rate", 1 / 9),
        ("hallucinated_rate", 2 / 11),
        ("missed_rate", 1 / 7),
        ("selection_accuracy", 5 / 7),
        ("argument_correctness", 1 / 2),
        ("schema_adherence", 7 / 8),
        ("end_to_end_accuracy", 2 / 7),
        ("sequence_accuracy", 0.75),
        ("response_compliance", 1 / 2),
        ("tool_usage_rate", 7 / 8),  # agent turns with a call / agent turns: "lost 9" is turnless, no turn
        ("over_calling_rate", 1 / 7),
    ],
)
def test_every_figure(tally: Tally, figure: str, expected: float) -> None:
    assert tally.ratios()[figure] == pytest.approx(expected)


@pytest.mark.parametrize(
    ("count", "value"),
    [
        ("turns", 9),
        ("judged_turns", 7),
        ("turnless_turns", 1),
        ("all_calls", 11),
        ("judged_calls", 9),
        ("correct", 6),
        ("wrong_tool", 1),
        ("spurious", 1),
        ("hallucinated", 2),
        ("judged_hallucinated", 1),
        ("unjudged", 1),
        ("missed", 1),
        ("expected_calls", 7),
        ("selection_ok_turns", 5),
        ("args_checked_calls", 2),
        ("args_ok_calls", 1),
        ("schema_checked_calls", 8),
        ("schema_valid_calls", 7),
        ("end_to_end_turns", 2),
        ("sequence_turns", 2),
        ("response_checked_turns", 2),
        ("turns_with_calls", 7),  # of the agent turns: the turnless group's call is no turn's
        ("over_calling_turns", 1),
    ],
)
def test_raw_counts(tally: Tally, count: str, value: int) -> None:
    assert getattr(tally, count) == value


def test_tool_usage_rate_is_over_the_agent_turns_only(tmp_path: Path) -> None:
    """METRICS.md: tool usage rate = turns with at least one call / all turns, a turn being one agent invocation.
    A turnless group (calls whose turn never arrived) is no agent invocation: it counts in neither term. Counted as a
    turn with calls, every turnless group pushed the rate towards 1 (here 3 / 4 for the agents' 1 / 2)."""
    judge = judge_for(tmp_path, RULES)
    agent_turns = [turn("[A] 1", call("a", {"x": 1})), turn("[NONE] 2")]
    turnless = [turn("", call("a", {"x": 1}), turnless=True), turn("", "b", "c", turnless=True)]
    t = Tally()
    for x in [agent_turns[0], *turnless, agent_turns[1]]:
        t.add(judge.judge(x))
    assert (t.turns, t.turnless_turns, t.turns_with_calls, t.agent_turns) == (4, 2, 1, 2)
    assert t.ratios()["tool_usage_rate"] == 0.5
    alone = Tally()
    for x in turnless:
        alone.add(judge.judge(x))
    assert alone.ratios()["tool_usage_rate"] is None  # no agent turn: absent, never 1
    assert (alone.turns, alone.turns_with_calls, alone.agent_turns) == (2, 0, 0)
    window = t.copy()
    window.subtract(alone)  # a rolling window's arithmetic keeps both terms
    assert window.ratios()["tool_usage_rate"] == 0.5 and window.agent_turns == 2


def test_confusion_matrix_and_per_tool_figures(tally: Tally) -> None:
    assert dict(tally.confusion) == {
        ("a", "a"): 4,
        ("a", "b"): 1,
        ("b", "b"): 2,
        (NONE_LABEL, NONE_LABEL): 1,
        (NONE_LABEL, "c"): 1,
        (NONE_LABEL, UNKNOWN_LABEL): 1,
    }
    p, r, f1 = tally.precision_recall_f1("a")
    assert (p, r, f1) == pytest.approx((1.0, 0.8, 2 * 0.8 / 1.8))
    p, r, f1 = tally.precision_recall_f1("b")
    assert (p, r, f1) == pytest.approx((2 / 3, 1.0, 0.8))
    assert tally.precision_recall_f1("c") == (0.0, None, None)
    assert set(tally.per_tool_prf()) == {"a", "b", "c"}
    a, b = tally.tool_ratios("a"), tally.tool_ratios("b")
    assert a["tool_call_accuracy"] == 1.0 and a["missed_rate"] == pytest.approx(1 / 5)
    assert b["tool_call_accuracy"] == pytest.approx(2 / 3) and b["wrong_tool_rate"] == pytest.approx(1 / 3)
    assert b["missed_rate"] == 0.0  # expected twice (SEQ turns), never missed
    assert tally.tool_ratios("never-seen")["tool_call_accuracy"] is None
    assert tally.per_tool["b"].expected_calls == 2 and tally.per_tool["b"].missed == 0
    assert tally.violations == {"type": 1}
    assert tally.rule_failures == {"A": 2, "SEQ": 2, "NONE": 1}


def test_zero_denominators_are_absent() -> None:
    empty = Tally()
    assert set(empty.ratios()) == set(FIGURES)
    assert all(v is None for v in empty.ratios().values())
    assert empty.format_accuracy() == "Tool call accuracy: 0/0 (absent)"
    assert empty.precision_recall_f1("a") == (None, None, None)


def test_only_unjudged_turns(base_judge: Judge) -> None:
    t = Tally()
    t.add(base_judge.judge(turn("no rule", "a", "zzz")))
    r = t.ratios()
    assert r["tool_call_accuracy"] is None and r["selection_accuracy"] is None and r["missed_rate"] is None
    assert r["hallucinated_rate"] == 0.5 and r["tool_usage_rate"] == 1.0
    assert r["sequence_accuracy"] is None and r["response_compliance"] is None


def test_none_turn_without_calls(base_judge: Judge) -> None:
    t = Tally()
    t.add(base_judge.judge(turn("[NONE] hello")))
    r = t.ratios()
    assert r["selection_accuracy"] == 1.0 and r["end_to_end_accuracy"] == 1.0
    assert r["tool_call_accuracy"] is None and r["missed_rate"] is None and r["tool_usage_rate"] == 0.0
    assert r["over_calling_rate"] == 0.0
    assert t.confusion == {(NONE_LABEL, NONE_LABEL): 1}


def test_merge_subtract_copy(tmp_path: Path) -> None:
    judge = judge_for(tmp_path, RULES)
    verdicts = [judge.judge(x) for x in scenario()]
    whole, first, second = Tally(), Tally(), Tally()
    for i, v in enumerate(verdicts):
        whole.add(v)
        (first if i < 4 else second).add(v)
    merged = first.copy()
    merged.merge(second)
    assert merged == whole
    assert merged.ratios() == whole.ratios()
    merged.subtract(second)
    assert merged == first
    assert first.copy() is not first and first.copy() == first
    window = whole.copy()
    window.subtract(whole)
    assert window == Tally() and all(v is None for v in window.ratios().values())


@pytest.mark.parametrize(
    ("correct", "judged", "text"),
    [
        (37, 40, "Tool call accuracy: 37/40 (92.5%)"),
        (1, 3, "Tool call accuracy: 1/3 (33.3%)"),
        (5, 5, "Tool call accuracy: 5/5 (100.0%)"),
    ],
)
def test_format_accuracy(correct: int, judged: int, text: str) -> None:
    t = Tally(correct=correct, judged_calls=judged)
    assert t.format_accuracy() == text


def test_figure_keys_agree_with_the_rule_schema() -> None:
    from monitor.alerts import FIGURES as ALERT_FIGURES
    from monitor.judge import PER_TOOL_FIGURES
    from monitor.rules import PER_TOOL_FIGURES as RULE_PER_TOOL
    from monitor.rules import rule_file_schema

    assert set(rule_file_schema()["$defs"]["alert"]["properties"]["figure"]["enum"]) == set(FIGURES)
    assert PER_TOOL_FIGURES is RULE_PER_TOOL and set(PER_TOOL_FIGURES) <= set(FIGURES)
    assert {k for k, f in ALERT_FIGURES.items() if f.per_tool} == set(PER_TOOL_FIGURES)
    assert set(Tally().tool_ratios("x")) == set(PER_TOOL_FIGURES)
