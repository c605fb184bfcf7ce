"""Collects TurnVerdicts into a Report: the sink that replay, eval, probe and scenarios share.

The figures and raw counts come from the judge's Tally (one definition, METRICS.md); the builder only
keeps what a Tally does not: the confusion cells in a stable order, the worst failing turns (a bounded
heap), one result per turn for JUnit (bounded) and sampled series.
"""

from __future__ import annotations

import heapq
import itertools
from collections import Counter
from typing import Any

from monitor.judge import Tally, add_verdict
from monitor.report._text import cut, natural_key
from monitor.report.model import CaseResult, Report, Sample, Table, ToolStats
from monitor.verdict import Outcome, TurnVerdict

COUNT_NAMES = (
    "turns",
    "turnless_turns",
    "correct",
    "wrong_tool",
    "spurious",
    "hallucinated",
    "unjudged",
    "judged_calls",
    "all_calls",
    "missed",
    "expected_calls",
    "judged_turns",
    "selection_ok_turns",
    "end_to_end_turns",
    "args_checked_calls",
    "args_ok_calls",
    "schema_checked_calls",
    "schema_valid_calls",
    "forbidden_calls",
)
INPUT_CHARS = 400
SERIES_POINTS = 400


def severity(verdict: TurnVerdict) -> int:
    """How bad a failing turn is: wrong, spurious and made-up calls, missed calls and failed checks."""
    bad_calls = sum(1 for c in verdict.calls if c.outcome not in (Outcome.CORRECT, Outcome.UNJUDGED))
    invalid = sum(1 for c in verdict.calls if c.schema_valid is False or c.args_ok is False)
    checks = (verdict.sequence_ok is False) + (verdict.response_ok is False)
    return 2 * (bad_calls + len(verdict.missed) + len(verdict.forbidden)) + invalid + checks


def turn_ident(verdict: TurnVerdict, case_id: str | None = None) -> str:
    if case_id:
        return case_id
    if verdict.trace_id:
        return f"{verdict.trace_id[:16]}/{verdict.span_id[:8]}" if verdict.span_id else verdict.trace_id[:16]
    return "turn"


def sample_of(verdict: TurnVerdict, ident: str) -> Sample:
    calls = [f"{c.name} -> {c.outcome.value}" + (" (schema)" if c.schema_valid is False else "") for c in verdict.calls]
    text = cut(verdict.input_text, INPUT_CHARS)
    return Sample(
        ident=ident,
        agent=verdict.agent,
        input_text=text,
        reason=verdict.reason,
        calls=calls,
        missed=[m.tool for m in verdict.missed],
        severity=severity(verdict),
    )


def per_tool_stats(tally: Tally) -> list[ToolStats]:
    """Per tool precision, recall and F1 (the Tally's, from the confusion matrix) with the row and column sums,
    tools in natural order (tool2 before tool10)."""
    rows: Counter[str] = Counter()
    cols: Counter[str] = Counter()
    for (e, a), n in tally.confusion.items():
        rows[e] += n
        cols[a] += n
    return [
        ToolStats(tool, tally.confusion.get((tool, tool), 0), rows[tool], cols[tool], p, r, f1)
        for tool, (p, r, f1) in sorted(tally.per_tool_prf().items(), key=lambda item: natural_key(item[0]))
    ]


class ReportBuilder:
    """Feed verdicts with `add`; `build` makes the Report. Memory is bounded by `worst` and `max_cases`.

    `keep_cases=False` keeps no per-turn result (only JUnit needs them; replay of big captures skips them).
    """

    def __init__(
        self, tally: Tally | None = None, *, worst: int = 10, max_cases: int = 100_000, keep_cases: bool = True
    ) -> None:
        self.tally = tally if tally is not None else Tally()
        self._worst_n = worst
        self._heap: list[tuple[int, int, Sample]] = []
        self._seq = itertools.count()
        self._max_cases = max_cases if keep_cases else 0
        self._keep_cases = keep_cases
        self.cases: list[CaseResult] = []
        self.cases_dropped = 0
        self.series: dict[str, list[tuple[int, float | None]]] = {}
        self._stride: dict[str, int] = {}

    def add(
        self,
        verdict: TurnVerdict,
        *,
        case_id: str | None = None,
        group: str | None = None,
        time_s: float = 0.0,
        status: str | None = None,
        message: str | None = None,
        detail: str | None = None,
    ) -> None:
        """Account one verdict; `status`/`message` override the JUnit result (eval: timeouts, trials), `detail` is
        added to its body (eval: the agent's traceback)."""
        failed = add_verdict(self.tally, verdict)  # self.tally.add(verdict); verdict.failed
        # a case can fail on what the verdict does not see (a step's tool-call count bounds, a run that timed out or
        # raised after the right calls): a worst turn too, with the case's reason
        case_failed = not failed and status in ("failed", "error")
        if not (failed or case_failed or self._keep_cases):
            return
        ident = turn_ident(verdict, case_id)
        if (failed or case_failed) and self._worst_n > 0:
            rank = severity(verdict) if failed else max(1, severity(verdict))
            key = (rank, -next(self._seq))  # worse first; among equals, the earlier turn
            reason = message if case_failed or status == "error" else None  # an error: the run's says what it was
            if len(self._heap) < self._worst_n:
                heapq.heappush(self._heap, (*key, self._sample(verdict, ident, rank, reason)))
            elif key > self._heap[0][:2]:
                heapq.heapreplace(self._heap, (*key, self._sample(verdict, ident, rank, reason)))
        if not self._keep_cases:
            return
        if status is None:
            status = "failed" if failed else ("passed" if verdict.judged else "skipped")
        calls = "; ".join(f"{c.name}: {c.outcome.value}" for c in verdict.calls)
        body = f"input: {verdict.input_text[:INPUT_CHARS]}\ncalls: {calls or '(none)'}"
        self.add_case(
            CaseResult(
                name=ident,
                group=group or verdict.agent or "toolwatch",
                status=status,
                message=message if message is not None else verdict.reason,
                detail=f"{body}\n{detail}" if detail else body,
                time_s=time_s,
            )
        )

    @staticmethod
    def _sample(verdict: TurnVerdict, ident: str, rank: int, reason: str | None) -> Sample:
        """The worst-turn sample of `verdict`, ranked `rank`; `reason` that of its case when the case failed on
        what the verdict does not see."""
        sample = sample_of(verdict, ident)
        sample.severity = rank
        if reason:
            sample.reason = reason
        return sample

    def add_case(self, case: CaseResult) -> None:
        if len(self.cases) < self._max_cases:
            self.cases.append(case)
        else:
            self.cases_dropped += 1

    def record_point(self, name: str, iteration: int, value: float | None) -> None:
        """Append one point of a series; past SERIES_POINTS every other point is dropped (the last is kept)."""
        points = self.series.setdefault(name, [])
        points.append((iteration, value))
        if len(points) > SERIES_POINTS:
            kept = points[::2]
            if kept[-1] != points[-1]:
                kept.append(points[-1])
            self.series[name] = kept
            self._stride[name] = self._stride.get(name, 1) * 2

    def track(self, iteration: int, name: str = "tool_call_accuracy", *, force: bool = False) -> None:
        """Record the running tool call accuracy as series `name`, at a stride that doubles as it grows."""
        if force or iteration % self._stride.get(name, 1) == 0:
            points = self.series.get(name)
            if points and points[-1][0] == iteration:
                return
            self.record_point(name, iteration, self.tally.ratios()["tool_call_accuracy"])

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for name in COUNT_NAMES:
            value: Any = getattr(self.tally, name, None)
            if isinstance(value, int):
                out[name] = value
        return out

    def build(
        self, command: str, title: str, *, tables: list[Table] | None = None, notes: list[str] | None = None
    ) -> Report:
        worst = [s for _, _, s in sorted(self._heap, key=lambda i: i[:2], reverse=True)]
        return Report(
            command=command,
            title=title,
            accuracy_line=self.tally.format_accuracy(),
            figures=dict(self.tally.ratios()),
            counts=self.counts(),
            confusion=sorted((e, a, n) for (e, a), n in self.tally.confusion.items() if n),
            per_tool=per_tool_stats(self.tally),
            worst=worst,
            cases=list(self.cases),
            cases_dropped=self.cases_dropped,
            series={k: list(v) for k, v in self.series.items()},
            tables=list(tables or []),
            notes=list(notes or []),
        )
