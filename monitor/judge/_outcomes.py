"""Outcomes of one alternative (METRICS.md "Each call gets exactly one outcome", "Confusion matrix")."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from math import lcm

from monitor.judge._match import assign, assign_one
from monitor.rules._model import Alternative
from monitor.verdict import NONE_LABEL, UNKNOWN_LABEL, MissedUnit, Outcome

# (call index, slot index) -> score units of the call in the slot: 2 per passing check; a call whose arguments
# were not captured gets 2n - 1 of 2n (unknown ranks below all-pass and above any failure, never ties with
# a captured call, so permuting calls cannot change which kind of call a slot takes).
ScoreFn = Callable[[int, int], int]


@dataclass(slots=True, frozen=True)
class AltResult:
    alternative: int
    outcomes: tuple[Outcome, ...]
    slots: tuple[int | None, ...]  # slot filled by each call (correct calls only)
    missed: tuple[MissedUnit, ...]
    confusion: tuple[tuple[str, str], ...]
    correct: int
    errors: int  # missed + wrong_tool + spurious + hallucinated

    def key(self) -> tuple[int, int, int]:
        return (-self.correct, self.errors, self.alternative)


def score_sensitive(alt: Alternative, counts: dict[str, int]) -> bool:
    """Whether argument scores can change the assignment (else it depends on the call names alone)."""
    for tool, slot_ix in alt.by_tool:
        k = counts.get(tool, 0)
        if not k:
            continue
        if len(slot_ix) > 1:
            if any(alt.slots[j].checks for j in slot_ix):
                return True
        else:
            s = alt.slots[slot_ix[0]]
            if s.checks and s.max is not None and s.max < k:
                return True
    return False


def evaluate(
    index: int, alt: Alternative, names: Sequence[str], in_catalog: Sequence[bool], passed: ScoreFn
) -> AltResult:
    n = len(names)
    slot_of: list[int | None] = [None] * n
    counts = [0] * len(alt.slots)
    if alt.slots:
        by_name: dict[str, list[int]] = {}
        for i, name in enumerate(names):
            if in_catalog[i]:
                by_name.setdefault(name, []).append(i)
        for tool, slot_ix in alt.by_tool:
            calls = by_name.get(tool)
            if not calls:
                continue
            _assign_tool(alt, slot_ix, calls, passed, slot_of, counts)
    return _outcomes(index, alt, names, in_catalog, slot_of, counts)


def _assign_tool(
    alt: Alternative,
    slot_ix: Sequence[int],
    calls: list[int],
    passed: ScoreFn,
    slot_of: list[int | None],
    counts: list[int],
) -> None:
    slots = [alt.slots[j] for j in slot_ix]
    if len(slots) == 1:
        s = slots[0]
        choose = bool(s.checks) and s.max is not None and s.max < len(calls)
        scores = [passed(i, s.index) for i in calls] if choose else None
        for pos in assign_one(len(calls), s.max, scores):
            slot_of[calls[pos]] = s.index
            counts[s.index] += 1
        return
    denom = lcm(*(2 * len(s.checks) or 1 for s in slots))
    table = [[passed(i, s.index) * (denom // (2 * len(s.checks))) if s.checks else denom for s in slots] for i in calls]
    local = assign(len(calls), [s.min for s in slots], [s.max for s in slots], table)
    for pos, j in enumerate(local):
        if j is not None:
            slot_of[calls[pos]] = slots[j].index
            counts[slots[j].index] += 1


def _outcomes(
    index: int,
    alt: Alternative,
    names: Sequence[str],
    in_catalog: Sequence[bool],
    slot_of: list[int | None],
    counts: list[int],
) -> AltResult:
    missed = [MissedUnit(s.tool, s.index) for s in alt.slots for _ in range(max(0, s.min - counts[s.index]))]
    outcomes: list[Outcome] = []
    confusion: list[tuple[str, str]] = []
    next_unit = 0
    correct = errors = 0
    for i, name in enumerate(names):
        if not in_catalog[i]:
            outcomes.append(Outcome.HALLUCINATED)
            errors += 1
        elif slot_of[i] is not None:
            outcomes.append(Outcome.CORRECT)
            correct += 1
            confusion.append((name, name))
        elif next_unit < len(missed):
            outcomes.append(Outcome.WRONG_TOOL)
            confusion.append((missed[next_unit].tool, name))
            next_unit += 1
            errors += 1
        else:
            outcomes.append(Outcome.SPURIOUS)
            confusion.append((NONE_LABEL, name))
            errors += 1
    for i in range(len(names)):
        if not in_catalog[i]:
            if next_unit < len(missed):
                confusion.append((missed[next_unit].tool, UNKNOWN_LABEL))
                next_unit += 1
            else:
                confusion.append((NONE_LABEL, UNKNOWN_LABEL))
    confusion.extend((u.tool, NONE_LABEL) for u in missed[next_unit:])
    if not alt.slots and not names:
        confusion.append((NONE_LABEL, NONE_LABEL))
    return AltResult(
        index, tuple(outcomes), tuple(slot_of), tuple(missed), tuple(confusion), correct, errors + len(missed)
    )
