"""The per-tool assignment is optimal exactly as METRICS.md "Matching" orders the objectives
(checked against brute force), and respects every slot maximum."""

from __future__ import annotations

import itertools
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.judge import _assignment
from monitor.judge._match import MAX_STATES, assign, assign_one


def brute_force(n: int, mins: list[int], maxs: list[int | None], scores: list[list[int]]) -> list[int | None]:
    m = len(mins)
    best_key: tuple[int, int, int] | None = None
    best: list[int | None] = []
    # Enumerated in lexicographic order of the slot sequence (None = unassigned sorts last), so the first
    # assignment reaching the best objective is the one where earlier calls take earlier slots.
    choices: list[int | None] = [*range(m), None]
    for combo in itertools.product(choices, repeat=n):
        counts = [combo.count(j) for j in range(m)]
        if any(mx is not None and c > mx for c, mx in zip(counts, maxs, strict=True)):
            continue
        assigned = sum(counts)
        met = sum(1 for c, mn in zip(counts, mins, strict=True) if c >= mn)
        score = sum(scores[i][j] for i, j in enumerate(combo) if j is not None)
        key = (assigned, met, score)
        if best_key is None or key > best_key:
            best_key, best = key, list(combo)
    return best


problems = st.integers(1, 3).flatmap(
    lambda m: st.tuples(
        st.integers(0, 5),
        st.lists(st.integers(0, 2), min_size=m, max_size=m),
        st.lists(st.one_of(st.none(), st.integers(1, 3)), min_size=m, max_size=m),
    )
)


@settings(max_examples=200, deadline=None)
@given(problems, st.data())
def test_assignment_matches_brute_force(problem: tuple[int, list[int], list[int | None]], data: st.DataObject) -> None:
    n, mins, maxs = problem
    maxs = [None if mx is None else max(mx, mn) for mn, mx in zip(mins, maxs, strict=True)]
    scores = data.draw(
        st.lists(st.lists(st.integers(0, 2), min_size=len(mins), max_size=len(mins)), min_size=n, max_size=n)
    )
    assert assign(n, mins, maxs, scores) == brute_force(n, mins, maxs, scores)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 6), st.one_of(st.none(), st.integers(1, 4)), st.lists(st.integers(0, 3), min_size=6, max_size=6))
def test_single_slot_fast_path_matches_brute_force(n: int, cap: int | None, scores: list[int]) -> None:
    scores = scores[:n]
    chosen = assign_one(n, cap, scores)
    expected = brute_force(n, [1], [cap], [[s] for s in scores])
    assert chosen == [i for i, j in enumerate(expected) if j == 0]


def test_huge_problems_stay_bounded_and_valid() -> None:
    n, mins, maxs = 60, [5, 5, 5, 5], [20, 20, 20, 20]
    scores = [[(i * 7 + j) % 3 for j in range(4)] for i in range(n)]
    assert 21**4 * (n + 1) > MAX_STATES  # takes the bounded fallback
    out = assign(n, mins, maxs, scores)
    counts = [out.count(j) for j in range(4)]
    assert all(c <= 20 for c in counts) and sum(counts) == 60 and all(c >= 5 for c in counts)


# The assignment-problem form used past MAX_STATES (monitor/judge/_assignment.py) must give the DP's answer, tie-break
# included, wherever it claims to be exact: every minimum at most 1, or calls for every minimum.
def _exact_case(
    problem: tuple[int, list[int], list[int | None]], data: st.DataObject, top: int
) -> tuple[int, list[int], list[int | None], list[list[int]]]:
    """The drawn problem made one the assignment-problem form is exact for (minimums at most 1 unless there are calls
    for them all; maximums at least the minimums), with scores from 0 to `top`."""
    n, mins, maxs = problem
    if sum(mins) > n:
        mins = [min(mn, 1) for mn in mins]
    maxs = [None if mx is None else max(mx, mn) for mn, mx in zip(mins, maxs, strict=True)]
    row = st.lists(st.integers(0, top), min_size=len(mins), max_size=len(mins))
    scores = data.draw(st.lists(row, min_size=n, max_size=n))
    assert _assignment.exact(n, mins)
    return n, mins, maxs, scores


@settings(max_examples=300, deadline=None)
@given(problems, st.data())
def test_assignment_problem_form_matches_brute_force(
    problem: tuple[int, list[int], list[int | None]], data: st.DataObject
) -> None:
    n, mins, maxs, scores = _exact_case(problem, data, 2)
    assert _assignment.assign_lap(n, mins, maxs, scores) == brute_force(n, mins, maxs, scores)


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 6).flatmap(lambda m: st.tuples(
    st.integers(0, 12),
    st.lists(st.integers(0, 3), min_size=m, max_size=m),
    st.lists(st.one_of(st.none(), st.integers(1, 4)), min_size=m, max_size=m),
)), st.data())
def test_assignment_problem_form_matches_the_dp_on_larger_turns(
    problem: tuple[int, list[int], list[int | None]], data: st.DataObject
) -> None:
    """Up to 12 calls and 6 slots (too many for brute force), scores with many ties: the same slot for every call."""
    n, mins, maxs, scores = _exact_case(problem, data, 6)
    assert math.comb(n + len(mins) + 1, len(mins) + 1) <= MAX_STATES  # `assign` runs the DP here, not the form
    assert _assignment.assign_lap(n, mins, maxs, scores) == assign(n, mins, maxs, scores)


def test_past_the_dp_bound_an_exact_problem_takes_the_assignment_problem_form() -> None:
    """16 one-call slots of one tool and 16 calls (2**16 * 17 DP states). Call 0 scores 1 in slot 0 and 2 in slot 1,
    call 1 scores 1 anywhere, call k >= 2 scores 2 in slot k only: a slot-order greedy fill gives slot 0 to call 0
    (the first of two scoring 1 there) and loses a point; the optimum is call 0 -> 1, call 1 -> 0, call k -> k."""
    n = m = 16
    assert 2**m * (n + 1) > MAX_STATES
    scores = [[1, 2, *[0] * (m - 2)], [1] * m, *([2 if j == i else 0 for j in range(m)] for i in range(2, n))]
    assert assign(n, [1] * m, [1] * m, scores) == [1, 0, *range(2, n)]


def test_past_the_dp_bound_minimums_that_cannot_all_be_met_still_assign_every_call() -> None:
    """Minimums of 2 in 9 slots and 12 calls: not the assignment problem's case (the fallback is not exact), but
    every call is still assigned and no maximum is passed."""
    n, m = 12, 9
    mins, maxs = [2] * m, [3] * m
    assert not _assignment.exact(n, mins)
    scores = [[(i * j) % 3 for j in range(m)] for i in range(n)]
    out = assign(n, mins, maxs, scores)
    assert None not in out
    assert all(out.count(j) <= 3 for j in range(m))
