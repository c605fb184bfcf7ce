"""Conformance with METRICS.md found by review: each case here failed before its fix."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.judge._match import assign
from tests.monitor.judge.helpers import call, judge_for, turn
from tests.monitor.judge.test_match import brute_force

# ---- Matching is optimal, never greedy, whatever the slot maximums ----
# Slots of one tool with large `max` values made the DP bound overflow (it counted up to `max` per slot even
# with a handful of calls), and a greedy assignment was used instead of the optimal one.

LARGE_MAX = """
catalog: {tools: [{name: a}, {name: b}]}
expect:
  - id: ARGS
    when: {prefix: "[ARGS]"}
    call:
      - {tool: a, min: 1, max: 500, args: {x: 1}}
      - {tool: a, min: 1, max: 500, args: {x: 1, y: 1}}
  - id: SCORE
    when: {prefix: "[SCORE]"}
    call:
      - {tool: b, min: 2, max: 300, args: {x: 0}}
      - {tool: b, min: 0, max: 700, args: {y: 0}}
"""

# (input, calls' arguments, slot of each call, args_ok of each call, missed slots)
LARGE_MAX_TABLE = [
    # Either assignment fills both slots; only (c0 -> slot 1, c1 -> slot 0) passes every check (score 2 > 1.5).
    ("[ARGS]", [{"x": 1, "y": 1}, {"x": 1, "y": 2}], [1, 0], [True, True], []),
    ("[ARGS]", [{"x": 1, "y": 2}, {"x": 1, "y": 1}], [0, 1], [True, True], []),
    # One call: slot 0 stays unmet either way (min 2), slot 1 (min 0) is met either way; the argument score
    # decides: slot 1. Slot 0 then misses two calls.
    ("[SCORE]", [{"x": 1, "y": 0}], [1], [True], [0, 0]),
]


@pytest.mark.parametrize(("text", "args", "slots", "args_ok", "missed"), LARGE_MAX_TABLE)
def test_assignment_is_optimal_with_large_slot_maximums(
    tmp_path: Path, text: str, args: list[dict[str, int]], slots: list[int], args_ok: list[bool], missed: list[int]
) -> None:
    judge = judge_for(tmp_path, LARGE_MAX)
    tool = "a" if text == "[ARGS]" else "b"
    v = judge.judge(turn(text + " x", *(call(tool, a) for a in args)))
    assert [c.outcome.value for c in v.calls] == ["correct"] * len(args)
    assert [c.slot for c in v.calls] == slots
    assert [c.args_ok for c in v.calls] == args_ok
    assert [m.slot for m in v.missed] == missed


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 3).flatmap(
        lambda m: st.tuples(
            st.integers(0, 4),
            st.lists(st.integers(0, 2), min_size=m, max_size=m),
            st.lists(st.sampled_from([None, 1, 2, 3, 300, 1000]), min_size=m, max_size=m),
        )
    ),
    st.data(),
)
def test_assignment_matches_brute_force_with_large_maximums(
    problem: tuple[int, list[int], list[int | None]], data: st.DataObject
) -> None:
    n, mins, maxs = problem
    maxs = [None if mx is None else max(mx, mn) for mn, mx in zip(mins, maxs, strict=True)]
    scores = data.draw(
        st.lists(st.lists(st.integers(0, 2), min_size=len(mins), max_size=len(mins)), min_size=n, max_size=n)
    )
    assert assign(n, mins, maxs, scores) == brute_force(n, mins, maxs, scores)


# ---- A turn with many calls of one tool is judged, never raises ----
# The assignment recursed once per call: a runaway agent's 1000+ calls of a tool with two slots raised
# RecursionError, and the turn went unjudged (the service counts a judge error and drops the turn).

MANY = """
catalog: {tools: [{name: a}]}
expect:
  - when: {prefix: "[MANY]"}
    call:
      - {tool: a, args: {x: 1}}
      - {tool: a, args: {x: 2}}
"""


@pytest.mark.parametrize("n", [2, 1500, 5000])
def test_many_calls_of_one_tool_are_judged(tmp_path: Path, n: int) -> None:
    judge = judge_for(tmp_path, MANY)
    calls = [call("a", {"x": 3})] * (n - 2) + [call("a", {"x": 2}), call("a", {"x": 1})]
    v = judge.judge(turn("[MANY] x", *calls))
    assert [c.outcome.value for c in v.calls] == ["spurious"] * (n - 2) + ["correct", "correct"]
    assert [c.slot for c in v.calls[-2:]] == [1, 0] and v.args_ok and v.missed == ()
    assert v.over_calling is (n > 2)
