"""Sequence score: LCS(actual tool names, expected order) / len(expected order), averaged over sequences."""

from __future__ import annotations

from collections.abc import Sequence


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


def sequence_score(names: Sequence[str], orders: Sequence[Sequence[str]]) -> float:
    """Mean over the expected sequences of LCS / length; 1.0 means every sequence was followed."""
    return sum(lcs(names, o) / len(o) for o in orders) / len(orders)
