"""Tally: aggregate counters over verdicts and the METRICS.md figures computed from them.

Not thread-safe: give each thread its own Tally and `merge` them. Ratios with a zero denominator are None.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import cast

from monitor.judge._percent import format_ratio
from monitor.otlp._accel import load_extension
from monitor.verdict import (
    NONE_LABEL,
    UNKNOWN_LABEL,
    CallVerdict,
    MissedUnit,
    Outcome,
    SchemaViolation,
    TurnVerdict,
    ViolationKind,
)

FIGURES = (
    "tool_call_accuracy",
    "spurious_rate",
    "wrong_tool_rate",
    "hallucinated_rate",
    "missed_rate",
    "selection_accuracy",
    "argument_correctness",
    "schema_adherence",
    "end_to_end_accuracy",
    "sequence_accuracy",
    "response_compliance",
    "tool_usage_rate",
    "over_calling_rate",
)


def ratio(num: float, den: float) -> float | None:
    return None if den == 0 else num / den


@dataclass(slots=True)
class ToolCounts:
    """Counts of one catalog tool (calls by their name; missed/expected by the slot's tool)."""

    calls: int = 0
    judged_calls: int = 0
    correct: int = 0
    wrong_tool: int = 0
    spurious: int = 0
    unjudged: int = 0
    missed: int = 0
    expected_calls: int = 0
    args_checked_calls: int = 0
    args_ok_calls: int = 0
    schema_checked_calls: int = 0
    schema_valid_calls: int = 0

    def ratios(self) -> dict[str, float | None]:
        return {
            "tool_call_accuracy": ratio(self.correct, self.judged_calls),
            "spurious_rate": ratio(self.spurious, self.judged_calls),
            "wrong_tool_rate": ratio(self.wrong_tool, self.judged_calls),
            "missed_rate": ratio(self.missed, self.expected_calls),
            "argument_correctness": ratio(self.args_ok_calls, self.args_checked_calls),
            "schema_adherence": ratio(self.schema_valid_calls, self.schema_checked_calls),
        }

    def _combine(self, other: ToolCounts, sign: int) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + sign * getattr(other, f.name))


_ZERO = ToolCounts()
_CORRECT, _WRONG_TOOL, _SPURIOUS, _HALLUCINATED = (
    Outcome.CORRECT,
    Outcome.WRONG_TOOL,
    Outcome.SPURIOUS,
    Outcome.HALLUCINATED,
)


@dataclass(slots=True)
class Tally:
    turns: int = 0  # every verdict: agent turns and turnless groups (calls whose turn never came, judged alone)
    judged_turns: int = 0
    turnless_turns: int = 0
    all_calls: int = 0
    judged_calls: int = 0
    correct: int = 0
    wrong_tool: int = 0
    spurious: int = 0
    hallucinated: int = 0  # in every turn (the hallucinated-rate numerator)
    judged_hallucinated: int = 0  # in judged turns (part of judged calls)
    unjudged: int = 0
    missed: int = 0
    expected_calls: int = 0
    selection_ok_turns: int = 0
    args_checked_calls: int = 0
    args_ok_calls: int = 0
    schema_checked_calls: int = 0
    schema_valid_calls: int = 0
    end_to_end_turns: int = 0
    sequence_turns: int = 0
    sequence_ok_turns: int = 0
    sequence_score_sum: float = 0.0
    response_checked_turns: int = 0
    response_ok_turns: int = 0
    turns_with_calls: int = 0  # agent turns (not turnless) with at least one call: the tool usage rate numerator
    over_calling_turns: int = 0
    forbidden_turns: int = 0
    forbidden_calls: int = 0
    violations: Counter[str] = field(default_factory=Counter)  # schema violation kind -> calls
    confusion: Counter[tuple[str, str]] = field(default_factory=Counter)  # (expected, actual) -> count
    per_tool: dict[str, ToolCounts] = field(default_factory=dict)
    rule_failures: Counter[str] = field(default_factory=Counter)  # rule id -> judged turns not end-to-end

    # ---- accumulation ----

    def _tool(self, name: str) -> ToolCounts:
        tc = self.per_tool.get(name)
        if tc is None:
            tc = self.per_tool[name] = ToolCounts()
        return tc

    def add(self, v: TurnVerdict) -> None:
        """Count one verdict. In C when the extension is loaded (_ctally.c, the same counts), else _add_py."""
        if _ADD_C is None or not _ADD_C(self, v):
            self._add_py(v)

    def _add_py(self, v: TurnVerdict) -> None:  # noqa: C901 - one flat pass over the verdict
        """add in Python: the reference of _ctally.c, which follows it line by line (and leaves it the verdicts
        and tallies that are not exactly of these classes and types)."""
        calls = v.calls
        n = len(calls)
        judged = v.judged
        self.turns += 1
        self.all_calls += n
        if v.turnless:
            self.turnless_turns += 1
        elif n:
            self.turns_with_calls += 1
        if judged:
            self._add_judged_turn(v, n)
        if v.forbidden:
            self.forbidden_turns += 1
            self.forbidden_calls += sum(1 for c in calls if c.name in v.forbidden)
        per_tool = self.per_tool
        for c in calls:  # locals and one lookup per call: this runs for every verdict of every sink
            outcome = c.outcome
            tc: ToolCounts | None = None
            if c.in_catalog:
                tc = per_tool.get(c.name)
                if tc is None:
                    tc = per_tool[c.name] = ToolCounts()
                tc.calls += 1
                if judged:
                    tc.judged_calls += 1
            if outcome is _CORRECT:
                self.correct += 1
                if tc is not None:
                    tc.correct += 1
            elif outcome is _WRONG_TOOL:
                self.wrong_tool += 1
                if tc is not None:
                    tc.wrong_tool += 1
            elif outcome is _SPURIOUS:
                self.spurious += 1
                if tc is not None:
                    tc.spurious += 1
            elif outcome is _HALLUCINATED:
                self.hallucinated += 1
                if judged:
                    self.judged_hallucinated += 1
            else:
                self.unjudged += 1
                if tc is not None:
                    tc.unjudged += 1
            valid = c.schema_valid
            if valid is not None:
                self.schema_checked_calls += 1
                if valid:
                    self.schema_valid_calls += 1
                    if tc is not None:
                        tc.schema_checked_calls += 1
                        tc.schema_valid_calls += 1
                else:
                    if tc is not None:
                        tc.schema_checked_calls += 1
                    for kind in {x.kind.value for x in c.violations}:
                        self.violations[kind] += 1
            args_ok = c.args_ok
            if args_ok is not None:
                self.args_checked_calls += 1
                if args_ok:
                    self.args_ok_calls += 1
                    if tc is not None:
                        tc.args_checked_calls += 1
                        tc.args_ok_calls += 1
                elif tc is not None:
                    tc.args_checked_calls += 1

    def _add_judged_turn(self, v: TurnVerdict, n: int) -> None:
        self.judged_turns += 1
        self.judged_calls += n
        self.missed += len(v.missed)
        self.expected_calls += v.expected_calls
        for tool, count in v.expected_by_tool:
            self._tool(tool).expected_calls += count
        for unit in v.missed:
            self._tool(unit.tool).missed += 1
        if v.selection_ok:
            self.selection_ok_turns += 1
        if v.end_to_end:
            self.end_to_end_turns += 1
        elif v.rule is not None:
            self.rule_failures[v.rule] += 1
        if v.sequence_score is not None:
            self.sequence_turns += 1
            self.sequence_score_sum += v.sequence_score
            if v.sequence_ok:
                self.sequence_ok_turns += 1
        if v.response_ok is not None:
            self.response_checked_turns += 1
            if v.response_ok:
                self.response_ok_turns += 1
        if v.over_calling:
            self.over_calling_turns += 1
        for pair in v.confusion:
            self.confusion[pair] += 1

    def _combine(self, other: Tally, sign: int) -> None:
        for f in fields(self):
            mine, theirs = getattr(self, f.name), getattr(other, f.name)
            if isinstance(mine, Counter):
                for k, c in theirs.items():
                    mine[k] += sign * c
                    if mine[k] == 0:
                        del mine[k]
            elif isinstance(mine, dict):
                for k, tc in theirs.items():
                    own = self._tool(k)
                    own._combine(tc, sign)
                    if own == _ZERO:
                        del mine[k]
            else:
                setattr(self, f.name, mine + sign * theirs)

    def merge(self, other: Tally) -> None:
        """Add another tally's counts to this one."""
        self._combine(other, 1)

    def subtract(self, other: Tally) -> None:
        """Remove counts that were merged or added before (rolling windows)."""
        self._combine(other, -1)

    def copy(self) -> Tally:
        out = Tally()
        out.merge(self)
        return out

    # ---- figures ----

    @property
    def agent_turns(self) -> int:
        """The turns that are agent invocations (METRICS.md "Turn"): all but the turnless groups, which are calls
        whose turn never came. The tool usage rate is over these only."""
        return self.turns - self.turnless_turns

    def ratios(self) -> dict[str, float | None]:
        """Every METRICS.md aggregate; None where the denominator is zero."""
        return {
            "tool_call_accuracy": ratio(self.correct, self.judged_calls),
            "spurious_rate": ratio(self.spurious, self.judged_calls),
            "wrong_tool_rate": ratio(self.wrong_tool, self.judged_calls),
            "hallucinated_rate": ratio(self.hallucinated, self.all_calls),
            "missed_rate": ratio(self.missed, self.expected_calls),
            "selection_accuracy": ratio(self.selection_ok_turns, self.judged_turns),
            "argument_correctness": ratio(self.args_ok_calls, self.args_checked_calls),
            "schema_adherence": ratio(self.schema_valid_calls, self.schema_checked_calls),
            "end_to_end_accuracy": ratio(self.end_to_end_turns, self.judged_turns),
            "sequence_accuracy": ratio(self.sequence_score_sum, self.sequence_turns),
            "response_compliance": ratio(self.response_ok_turns, self.response_checked_turns),
            "tool_usage_rate": ratio(self.turns_with_calls, self.agent_turns),
            "over_calling_rate": ratio(self.over_calling_turns, self.judged_turns),
        }

    def tool_ratios(self, tool: str) -> dict[str, float | None]:
        """The per-tool figures of one tool (all None for a tool never seen)."""
        return self.per_tool.get(tool, ToolCounts()).ratios()

    def precision_recall_f1(self, tool: str) -> tuple[float | None, float | None, float | None]:
        """From the confusion matrix: precision = (A, A) / column A, recall = (A, A) / row A."""
        hit = self.confusion.get((tool, tool), 0)
        column = sum(c for (_, a), c in self.confusion.items() if a == tool)
        row = sum(c for (e, _), c in self.confusion.items() if e == tool)
        p, r = ratio(hit, column), ratio(hit, row)
        f1 = None if p is None or r is None else (0.0 if p + r == 0 else 2 * p * r / (p + r))
        return p, r, f1

    def per_tool_prf(self) -> dict[str, tuple[float | None, float | None, float | None]]:
        """Precision, recall and F1 of every tool in the confusion matrix."""
        labels = {x for pair in self.confusion for x in pair} - {NONE_LABEL, UNKNOWN_LABEL}
        return {t: self.precision_recall_f1(t) for t in sorted(labels)}

    def format_accuracy(self) -> str:
        """`Tool call accuracy: 37/40 (92.5%)` (`absent` when nothing was judged, as every ratio over 0)."""
        shown = format_ratio(ratio(self.correct, self.judged_calls))
        return f"Tool call accuracy: {self.correct}/{self.judged_calls} ({shown})"


def add_verdict(tally: Tally, v: TurnVerdict) -> bool:
    """`tally.add(v)`, then `v.failed`: what a report sink asks of every verdict, in one C call when the extension
    is loaded and takes them (_ctally.add_failed)."""
    if _ADD_FAILED_C is not None:
        failed = _ADD_FAILED_C(tally, v)
        if failed is not None:
            return failed
    tally.add(v)
    return v.failed


def _load_c() -> tuple[Callable[[Tally, TurnVerdict], bool], Callable[[Tally, TurnVerdict], bool | None]] | None:
    """add and add_failed of the C tally (_ctally.c), given the classes it counts; None when it is not loaded (see
    load_extension)."""
    mod = load_extension(
        "monitor.judge._ctally",
        Tally,
        ToolCounts,
        TurnVerdict,
        CallVerdict,
        MissedUnit,
        SchemaViolation,
        ViolationKind,
        Counter,
        (_CORRECT, _WRONG_TOOL, _SPURIOUS, _HALLUCINATED),
    )
    if mod is None:
        return None
    return (
        cast(Callable[[Tally, TurnVerdict], bool], mod.add),
        cast(Callable[[Tally, TurnVerdict], bool | None], mod.add_failed),
    )


_ADD_C, _ADD_FAILED_C = _load_c() or (None, None)
