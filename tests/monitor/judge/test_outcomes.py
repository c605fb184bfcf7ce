"""Every outcome of METRICS.md, missed units, pairing and the confusion matrix, as a table."""

from __future__ import annotations

import pytest

from monitor.judge import Judge
from monitor.verdict import NONE_LABEL as NONE
from monitor.verdict import UNKNOWN_LABEL as UNK
from tests.monitor.judge.helpers import call, turn

C, W, S, H, U = "correct", "wrong_tool", "spurious", "hallucinated", "unjudged"

# (input, calls, outcomes, missed tools, confusion pairs, selection_ok, over_calling)
TABLE = [
    ("[A] x", ["a"], [C], [], [("a", "a")], True, False),
    ("[A] x", ["b"], [W], ["a"], [("a", "b")], False, False),
    ("[A] x", ["a", "a"], [C, S], [], [("a", "a"), (NONE, "a")], False, True),
    ("[A] x", [], [], ["a"], [("a", NONE)], False, False),
    ("[A] x", ["zzz"], [H], ["a"], [("a", UNK)], False, False),
    ("[A] x", ["b", "zzz"], [W, H], ["a"], [("a", "b"), (NONE, UNK)], False, True),
    ("[A] x", ["zzz", "b"], [H, W], ["a"], [("a", "b"), (NONE, UNK)], False, True),
    ("[A] x", ["b", "a"], [S, C], [], [(NONE, "b"), ("a", "a")], False, True),
    ("[NONE] hi", [], [], [], [(NONE, NONE)], True, False),
    ("[NONE] hi", ["a"], [S], [], [(NONE, "a")], False, True),
    ("[NONE] hi", ["zzz"], [H], [], [(NONE, UNK)], False, True),
    ("[AB] x", ["b", "a"], [C, C], [], [("b", "b"), ("a", "a")], True, False),
    ("[AB] x", ["c", "a"], [W, C], ["b"], [("b", "c"), ("a", "a")], False, False),
    ("[AB] x", ["c", "d"], [W, W], ["a", "b"], [("a", "c"), ("b", "d")], False, False),
    ("[AB] x", ["c", "d", "c"], [W, W, S], ["a", "b"], [("a", "c"), ("b", "d"), (NONE, "c")], False, True),
    ("[AB] x", ["zzz", "c"], [H, W], ["a", "b"], [("a", "c"), ("b", UNK)], False, False),
    ("[AB] x", [], [], ["a", "b"], [("a", NONE), ("b", NONE)], False, False),
    ("[A2] x", ["a"], [C], ["a"], [("a", "a"), ("a", NONE)], False, False),
    ("[A2] x", ["a", "a", "a"], [C, C, S], [], [("a", "a"), ("a", "a"), (NONE, "a")], False, True),
    ("[AMIN] x", ["a", "a", "a"], [C, C, C], [], [("a", "a")] * 3, True, False),
    ("[OPT] x", [], [], [], [], True, False),
    ("[OPT] x", ["a", "a", "a"], [C, C, S], [], [("a", "a"), ("a", "a"), (NONE, "a")], False, True),
    ("[ANY] x", ["a"], [C], [], [("a", "a")], True, False),
    ("[ANY] x", ["c", "b"], [C, C], [], [("c", "c"), ("b", "b")], True, False),
    ("[ANY] x", ["b"], [C], ["c"], [("b", "b"), ("c", NONE)], False, False),
]


@pytest.mark.parametrize(("text", "names", "outcomes", "missed", "confusion", "selection_ok", "over"), TABLE)
def test_outcome_table(
    base_judge: Judge,
    text: str,
    names: list[str],
    outcomes: list[str],
    missed: list[str],
    confusion: list[tuple[str, str]],
    selection_ok: bool,
    over: bool,
) -> None:
    v = base_judge.judge(turn(text, *names))
    assert v.judged
    assert [c.outcome.value for c in v.calls] == outcomes
    assert [m.tool for m in v.missed] == missed
    assert sorted(v.confusion) == sorted(confusion)
    assert v.selection_ok is selection_ok
    assert v.over_calling is over
    assert v.end_to_end is selection_ok  # nothing else is checked by these rules
    assert v.reason.startswith("ok" if selection_ok else "failed")


def test_unjudged_turn_keeps_hallucinated_and_has_no_confusion(base_judge: Judge) -> None:
    v = base_judge.judge(turn("no rule matches this", "a", "zzz"))
    assert not v.judged
    assert [c.outcome.value for c in v.calls] == [U, H]
    assert v.rule is None and v.selection_ok is None and v.end_to_end is None and v.over_calling is None
    assert v.confusion == () and v.expected_calls == 0
    assert v.reason.startswith("unjudged")


def test_turnless_turn_gets_catalog_and_schema_checks_only(base_judge: Judge) -> None:
    v = base_judge.judge(turn("[A] would match", call("a", {"x": "no"}), "zzz", turnless=True))
    assert v.turnless and not v.judged and v.rule is None
    assert [c.outcome.value for c in v.calls] == [U, H]
    assert v.calls[0].schema_valid is False and not v.schema_ok
    assert v.reason.startswith("turnless")


def test_any_of_prefers_most_correct_then_fewest_errors_then_file_order(base_judge: Judge) -> None:
    assert base_judge.judge(turn("[ANY] x", "a")).alternative == 0
    assert base_judge.judge(turn("[ANY] x", "b", "c")).alternative == 1
    # No call: alternative 0 misses 1, alternative 1 misses 2 -> alternative 0.
    v = base_judge.judge(turn("[ANY] x"))
    assert v.alternative == 0 and [m.tool for m in v.missed] == ["a"] and v.expected_calls == 1
    # d alone: both alternatives have 0 correct; alt 0 has 2 errors (wrong_tool + missed), alt 1 has 3.
    v = base_judge.judge(turn("[ANY] x", "d"))
    assert v.alternative == 0 and [c.outcome.value for c in v.calls] == [W]


@pytest.mark.parametrize(
    ("calls", "slots", "args_ok"),
    [
        ([{"x": 1}, {"x": 2}], [0, 1], [True, True]),
        ([{"x": 2}, {"x": 1}], [1, 0], [True, True]),  # not positional: each call takes its matching slot
        ([{"x": 3}, {"x": 3}], [0, 1], [False, False]),  # ties: the earlier call takes the earlier slot
    ],
)
def test_optimal_assignment_uses_argument_scores(
    base_judge: Judge, calls: list[dict[str, int]], slots: list[int], args_ok: list[bool]
) -> None:
    v = base_judge.judge(turn("[ARG2] x", *(call("a", c) for c in calls)))
    assert [c.slot for c in v.calls] == slots
    assert [c.args_ok for c in v.calls] == args_ok


def test_better_scoring_later_call_fills_the_single_slot(base_judge: Judge) -> None:
    v = base_judge.judge(turn("[ARG1] x", call("a", {"x": 5}), call("a", {"x": 1})))
    assert [c.outcome.value for c in v.calls] == [S, C]
    assert v.calls[1].args_ok is True and v.args_ok
    v = base_judge.judge(turn("[ARG1] x", call("a", {"x": 1}), call("a", {"x": 1})))
    assert [c.outcome.value for c in v.calls] == [C, S]


def test_minimums_met_outrank_argument_score(base_judge: Judge) -> None:
    # One call a(x=2): the optional slot would score better, but filling the required slot meets more minimums.
    v = base_judge.judge(turn("[MINFIRST] x", call("a", {"x": 2})))
    assert v.calls[0].slot == 0 and v.missed == () and v.selection_ok
    assert v.calls[0].args_ok is False and v.end_to_end is False
    v = base_judge.judge(turn("[MINFIRST] x", call("a", {"x": 2}), call("a", {"x": 1})))
    assert [c.slot for c in v.calls] == [1, 0] and v.args_ok and v.end_to_end


def test_duplicate_calls_with_same_id_are_each_judged(base_judge: Judge) -> None:
    v = base_judge.judge(turn("[A] x", call("a", call_id="1"), call("a", call_id="1")))
    assert [c.outcome.value for c in v.calls] == [C, S]


def test_prefix_ignores_leading_whitespace_and_tags_in_the_body(base_judge: Judge) -> None:
    v = base_judge.judge(turn("   [A] failure [AB] [NONE] in body", "a"))
    assert v.rule == "A" and v.selection_ok


def test_uncaptured_arguments_rank_between_passing_and_failing(base_judge: Judge) -> None:
    v = base_judge.judge(turn("[ARG1] x", call("a", None), call("a", {"x": 1})))
    assert [c.outcome.value for c in v.calls] == [S, C] and v.calls[1].args_ok is True
    v = base_judge.judge(turn("[ARG1] x", call("a", "{bad"), call("a", None)))
    assert [c.outcome.value for c in v.calls] == [S, C] and v.calls[1].args_ok is None and v.args_ok


def test_positionally_built_verdicts_equal_keyword_built_ones(base_judge: Judge) -> None:
    import dataclasses

    from monitor.verdict import CallVerdict, TurnVerdict

    for t in (turn("[AB] x", call("a", {"x": 1}), "zzz"), turn("no rule", "a"), turn("[ARG1] x", call("a", {"x": 2}))):
        v = base_judge.judge(t)
        assert type(v) is TurnVerdict and all(type(c) is CallVerdict for c in v.calls)
        rebuilt = TurnVerdict(**{f.name: getattr(v, f.name) for f in dataclasses.fields(TurnVerdict)})
        assert rebuilt == v
        for c in v.calls:
            assert CallVerdict(**{f.name: getattr(c, f.name) for f in dataclasses.fields(CallVerdict)}) == c


def test_long_made_up_names_are_not_cached(base_judge: Judge) -> None:
    """Tool names come from the agent: a cache entry must not hold megabytes of them."""
    before = len(base_judge._outcome_cache), len(base_judge._reason_cache)
    for i in range(20):
        v = base_judge.judge(turn("[AMIN] x", "a", f"{i}" + "x" * 100_000))
        assert [c.outcome.value for c in v.calls] == [C, H]
    assert (len(base_judge._outcome_cache), len(base_judge._reason_cache)) == before
    base_judge.judge(turn("[AMIN] x", "a", "short_made_up"))
    assert len(base_judge._outcome_cache) == before[0] + 1  # short names are still cached


def test_caches_stay_bounded(base_judge: Judge) -> None:
    from monitor.judge._judge import MAX_CACHE

    for i in range(MAX_CACHE + 10):
        base_judge.judge(turn("[AMIN] x", "a", f"made_up_{i}"))  # a new cache key each time
    assert 0 < len(base_judge._outcome_cache) <= MAX_CACHE
    many = base_judge.judge(turn("[AMIN] x", *(["a"] * 100)))
    assert many.selection_ok and len(many.calls) == 100
