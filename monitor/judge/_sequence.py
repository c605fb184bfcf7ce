"""Ordering constraints and the sequence score (METRICS.md "Per turn").

An expected sequence holds when the called tool names contain it as a subsequence; its score is
LCS(actual names, expected order) / len(expected order). A `before`/`after` pair holds when every call
of `after` comes after some call of `before` (so it holds when `after` is not called); its score is 1
when it holds, else the LCS share of (before, after). A turn's sequence score is the mean over its
constraints; sequence_ok means every constraint holds.
"""

from __future__ import annotations

from collections.abc import Sequence

from monitor.rules._model import Order


def lcs(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence (O(len(a) * len(b)) time, O(len(b)) memory)."""
    if not a or not b:
        return 0
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def _pair_holds(names: Sequence[str], before: str, after: str) -> bool:
    seen_before = False
    for n in names:
        if n == before:
            seen_before = True
        elif n == after and not seen_before:
            return False
    return True


def check(names: Sequence[str], order: Order) -> tuple[bool, float]:
    """(the constraint holds, its score); the LCS is computed once, and not at all for a pair that holds."""
    if order.pairwise and _pair_holds(names, *order.names):
        return True, 1.0
    common = lcs(names, order.names)
    ok = False if order.pairwise else common == len(order.names)
    return ok, common / len(order.names)


def sequence_check(names: Sequence[str], orders: Sequence[Order]) -> tuple[bool, float]:
    """(every constraint holds, mean score)."""
    results = [check(names, o) for o in orders]
    return all(ok for ok, _ in results), sum(x for _, x in results) / len(orders)
