"""Optimal assignment of calls to the expected slots of one tool (METRICS.md "Matching").

A call only fills a slot of its own tool, so the problem splits per tool name. Within one tool we
maximize, in order: (1) assigned calls, (2) slot minimums met, (3) summed argument score, (4) the original
order (an earlier call takes an earlier slot; being assigned counts as earlier than being left out).
Scores are integers (the share of a slot's checks that pass, scaled by a common denominator) so that
comparisons are exact. A call whose arguments were not captured scores (2n - 1) / 2n in a slot with n
checks: unknown, below a call that passes every check and above any call that fails one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from monitor.judge import _assignment

MAX_STATES = 200_000  # DP table bound; beyond it the assignment-problem form (`_assignment`), exact where it applies

Value = tuple[int, int, int]


def assign_one(n: int, cap: int | None, scores: Sequence[int] | None) -> list[int]:
    """One slot: the positions (in call order) of the calls that fill it."""
    k = n if cap is None else min(n, cap)
    if scores is None or k == n:
        return list(range(k))
    best = sorted(range(n), key=lambda i: (-scores[i], i))[:k]
    return sorted(best)


def assign(
    n: int, mins: Sequence[int], maxs: Sequence[int | None], scores: Sequence[Sequence[int]]
) -> list[int | None]:
    """For each of n calls (in call order) the local slot index it fills, or None.

    `scores[i][j]` is the (scaled) argument score of call i in slot j.
    """
    m = len(mins)
    # A slot never holds more than the n calls: counting beyond n (a large `max`) would only inflate the bound.
    caps = [min(mx if mx is not None else mn, n) for mn, mx in zip(mins, maxs, strict=True)]
    # Reachable states after i calls have counts summing to at most i: at most C(n + m + 1, m + 1) in all.
    size = min(math.prod(c + 1 for c in caps) * (n + 1), math.comb(n + m + 1, m + 1))
    if size > MAX_STATES:
        if _assignment.exact(n, mins) and _assignment.affordable(n, maxs):
            return _assignment.assign_lap(n, mins, maxs, scores)
        return _greedy(n, mins, maxs, scores)  # minimums of 2 or more not all met, in a turn this large: not exact
    memo = _table(n, mins, maxs, caps, scores)

    def best(i: int, state: tuple[int, ...]) -> Value:
        return memo[(i, state)]

    state = tuple(0 for _ in range(m))
    out: list[int | None] = []
    for i in range(n):
        target = best(i, state)
        chosen: int | None = None
        for j in range(m):
            nxt = _step(state, j, maxs[j], caps[j])
            if nxt is None:
                continue
            a, met, s = best(i + 1, nxt)
            if (a + 1, met, s + scores[i][j]) == target:
                chosen, state = j, nxt
                break
        out.append(chosen)
    return out


def _table(
    n: int, mins: Sequence[int], maxs: Sequence[int | None], caps: Sequence[int], scores: Sequence[Sequence[int]]
) -> dict[tuple[int, tuple[int, ...]], Value]:
    """The best value of every (calls done, slot counts) state reachable, filled bottom-up.

    No recursion: a turn may hold thousands of calls of one tool.
    """
    m = len(mins)
    start = tuple(0 for _ in range(m))
    layers: list[set[tuple[int, ...]]] = [{start}]  # layers[i]: states reachable after the first i calls
    for _ in range(n):
        grown = set(layers[-1])
        for st in layers[-1]:
            for j in range(m):
                nxt = _step(st, j, maxs[j], caps[j])
                if nxt is not None:
                    grown.add(nxt)
        layers.append(grown)
    memo: dict[tuple[int, tuple[int, ...]], Value] = {
        (n, st): (0, sum(1 for j in range(m) if st[j] >= mins[j]), 0) for st in layers[n]
    }
    for i in range(n - 1, -1, -1):
        row = scores[i]
        for st in layers[i]:
            value = memo[(i + 1, st)]
            for j in range(m):
                nxt = _step(st, j, maxs[j], caps[j])
                if nxt is None:
                    continue
                a, met, s = memo[(i + 1, nxt)]
                cand = (a + 1, met, s + row[j])
                if cand > value:
                    value = cand
            memo[(i, st)] = value
    return memo


def _step(state: tuple[int, ...], j: int, mx: int | None, cap: int) -> tuple[int, ...] | None:
    """The state after one more call in slot j, or None when slot j is full."""
    c = state[j]
    if mx is not None and c >= mx:
        return None
    if c >= cap:  # unbounded slot already at its minimum: count saturates
        return state
    return state[:j] + (c + 1,) + state[j + 1 :]


def _greedy(
    n: int, mins: Sequence[int], maxs: Sequence[int | None], scores: Sequence[Sequence[int]]
) -> list[int | None]:
    out: list[int | None] = [None] * n
    counts = [0] * len(mins)
    for phase in (0, 1):  # minimums first, then up to the maximums
        for j in range(len(mins)):
            limit = mins[j] if phase == 0 else maxs[j]
            free = sorted((i for i in range(n) if out[i] is None), key=lambda i: (-scores[i][j], i))
            for i in free:
                if limit is not None and counts[j] >= limit:
                    break
                out[i] = j
                counts[j] += 1
    return out
