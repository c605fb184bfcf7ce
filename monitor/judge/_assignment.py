"""The per-tool assignment of METRICS.md "Matching" as a linear assignment problem, for turns too large for the DP.

Each slot j becomes `u_j` unit columns (its maximum, or n when unbounded, never more than n); a call fills one unit.
The objectives of `_match`, in order: (1) assigned calls, (2) slot minimums met, (3) summed argument score, (4) the
original order, become one integer value per (call, unit), so one maximum-weight assignment (the Hungarian method,
exact integers) gives the same answer as the DP:

- (1) needs no weight: with n <= sum(u) every call is assigned; otherwise n - sum(u) "left out" columns take the
  calls that fill no unit, and every unit is filled.
- (2) is linear when the first `min_j` units of slot j carry a bonus: the bonus then counts sum(min(c_j, min_j)),
  which ranks assignments as "minimums met" does when every minimum is at most 1 (a slot's one unit is the slot),
  or when there are calls for every minimum (the best then meets them all, as the DP's best does). Elsewhere
  (minimums of 2 or more that cannot all be met) the two objectives differ: `exact` says so and the caller decides.
- (4) is a number in base m + 1 whose digit i is call i's slot (m when left out), subtracted: the lexicographically
  first sequence of slots among the best assignments, which is the DP's choice.
"""

from __future__ import annotations

from collections.abc import Sequence

MAX_OPS = 2_000_000  # n * n * columns: the Hungarian method's work; beyond it the caller falls back


def exact(n: int, mins: Sequence[int]) -> bool:
    """Whether the bonus of the first `min_j` units ranks assignments exactly as "minimums met" does."""
    return all(mn <= 1 for mn in mins) or sum(mins) <= n


def units(n: int, maxs: Sequence[int | None]) -> list[int]:
    """The unit columns of each slot."""
    return [n if mx is None else min(mx, n) for mx in maxs]


def affordable(n: int, maxs: Sequence[int | None]) -> bool:
    cols = max(n, sum(units(n, maxs)))
    return n * n * cols <= MAX_OPS


def assign_lap(
    n: int, mins: Sequence[int], maxs: Sequence[int | None], scores: Sequence[Sequence[int]]
) -> list[int | None]:
    """For each of n calls (in call order) the local slot index it fills, or None (see the module text; only exact
    where `exact(n, mins)`)."""
    m = len(mins)
    if n == 0:
        return []
    slot_of_col: list[int | None] = []
    bonus_of_col: list[int] = []
    for j, u in enumerate(units(n, maxs)):
        for k in range(u):
            slot_of_col.append(j)
            bonus_of_col.append(1 if k < mins[j] else 0)
    left_out = max(0, n - len(slot_of_col))
    slot_of_col += [None] * left_out
    bonus_of_col += [0] * left_out
    base = m + 1
    order_w = [base ** (n - 1 - i) for i in range(n)]
    score_w = base**n  # above any difference of the order term
    top = max((max(row) for row in scores if row), default=0)
    met_w = score_w * (n * top + 1)  # above any difference of score and order together
    values = [
        [
            (met_w * b + score_w * scores[i][j] - order_w[i] * j) if j is not None else -order_w[i] * m
            for j, b in zip(slot_of_col, bonus_of_col, strict=True)
        ]
        for i in range(n)
    ]
    col = _hungarian_max(values)
    return [slot_of_col[c] for c in col]


def _hungarian_max(values: Sequence[Sequence[int]]) -> list[int]:
    """The column of each row in an assignment of every row to a distinct column (rows <= columns) with the largest
    summed value: the Hungarian method on the costs -value, with row and column potentials, O(rows^2 * columns)."""
    rows, cols = len(values), len(values[0])
    u = [0] * (rows + 1)  # row potentials, 1-based; index 0 unused
    v = [0] * (cols + 1)  # column potentials; column 0 is the virtual start
    owner = [0] * (cols + 1)  # owner[j]: the row holding column j (0 = free)
    for r in range(1, rows + 1):
        _add_row(values, r, u, v, owner)
    col_of = [0] * rows
    for j in range(1, cols + 1):
        if owner[j]:
            col_of[owner[j] - 1] = j - 1
    return col_of


def _add_row(values: Sequence[Sequence[int]], r: int, u: list[int], v: list[int], owner: list[int]) -> None:
    """Assign row r along a shortest augmenting path (reduced costs), keeping the potentials feasible."""
    cols = len(v) - 1
    way = [0] * (cols + 1)
    minv: list[int | None] = [None] * (cols + 1)
    used = [False] * (cols + 1)
    owner[0] = r
    j0 = 0
    while owner[j0]:
        used[j0] = True
        r0 = owner[j0]
        row, ur0 = values[r0 - 1], u[r0]
        delta: int | None = None
        j1 = 0
        for j in range(1, cols + 1):
            if used[j]:
                continue
            cur = -row[j - 1] - ur0 - v[j]
            mj = minv[j]
            if mj is None or cur < mj:
                minv[j] = mj = cur
                way[j] = j0
            if delta is None or mj < delta:
                delta, j1 = mj, j
        assert delta is not None  # rows <= columns: a free column is always left
        for j in range(cols + 1):
            if used[j]:
                u[owner[j]] += delta
                v[j] -= delta
            elif (mj := minv[j]) is not None:
                minv[j] = mj - delta
        j0 = j1
    while j0:  # flip the path back to the start
        j1 = way[j0]
        owner[j0] = owner[j1]
        j0 = j1
