"""Verdict counters kept in plain dicts (one update per call, no label lookups) and rendered at scrape time."""

from __future__ import annotations

from collections.abc import Iterable

from monitor.metrics import names as n
from monitor.metrics._labels import LabelPolicy
from monitor.verdict import TurnVerdict

Key = tuple[str, ...]
Counts = dict[Key, int]

# name -> (help, label names); the order of the dicts in VerdictCounters.tables follows this.
COUNTERS: dict[str, tuple[str, tuple[str, ...]]] = {
    n.TOOL_CALLS: (
        "Tool calls by outcome (correct, wrong_tool, spurious, hallucinated, unjudged).",
        ("agent", "tool", "outcome"),
    ),
    n.JUDGED_CALLS: ("Calls in judged turns (the tool call accuracy denominator).", ("agent", "tool")),
    n.EXPECTED_CALLS: ("Expected calls: the sum of slot minimums over judged turns.", ("agent", "tool")),
    n.MISSED_CALLS: ("Expected calls that were not made.", ("agent", "tool")),
    n.TURNS: ("Turns judged or not (no matching expectation, or turnless).", ("agent", "judged")),
    n.TURN_CHECKS: ("Per-turn check results.", ("agent", "check", "result")),
    n.SCHEMA_CHECKED_CALLS: ("Calls whose arguments were checked against the tool's JSON Schema.", ("agent", "tool")),
    n.SCHEMA_VIOLATIONS: ("Calls violating the tool's JSON Schema, by kind.", ("agent", "tool", "kind")),
    n.SCHEMA_INVALID_CALLS: (
        "Calls violating the tool's JSON Schema (each once, whatever the kinds).",
        ("agent", "tool"),
    ),
    n.ARGUMENT_CHECKED_CALLS: ("Correct calls with argument checks.", ("agent", "tool")),
    n.ARGUMENT_MISMATCHES: ("Correct calls failing an argument check.", ("agent", "tool")),
    n.FORBIDDEN_CALLS: ("Calls of forbidden tools.", ("agent", "tool")),
    n.ORDER_VIOLATIONS: ("Turns violating an ordering constraint.", ("agent",)),
    n.CONFUSION: ("Confusion matrix of expected versus called tool.", ("agent", "expected", "actual")),
    n.RULE_FAILURES: ("Judged turns not end-to-end correct, by the expectation rule used.", ("agent", "rule")),
    n.TURNS_WITH_CALLS: ("Turns with at least one tool call.", ("agent",)),
    n.SEQUENCE_SCORE: ("Sum of sequence scores over turns with ordering constraints.", ("agent",)),
    n.RESPONSE_CHECKED_TURNS: ("Turns with response checks.", ("agent",)),
}


class VerdictCounters:
    """The verdict counters of COMMON.md, updated per verdict."""

    def __init__(self, labels: LabelPolicy) -> None:
        self.labels = labels
        self.tables: dict[str, Counts] = {name: {} for name in COUNTERS}
        self.sequence_score: dict[str, float] = {}
        self._tool_cache: dict[str, str] = {}

    def set_labels(self, labels: LabelPolicy) -> None:
        self.labels = labels
        self._tool_cache = {}

    def _tool(self, name: str) -> str:
        label = self._tool_cache.get(name)
        if label is None:
            label = self.labels.tool(name)
            if len(self._tool_cache) < 4096 and len(name) <= 256:  # bounded in bytes too: names are free-form
                self._tool_cache[name] = label
        return label

    def add(self, verdicts: Iterable[TurnVerdict]) -> None:  # noqa: C901 - one flat pass per verdict
        t = self.tables
        calls_t = t[n.TOOL_CALLS]
        judged_t = t[n.JUDGED_CALLS]
        checks_t = t[n.TURN_CHECKS]
        schema_t = t[n.SCHEMA_CHECKED_CALLS]
        args_t = t[n.ARGUMENT_CHECKED_CALLS]
        tool_label = self._tool
        labels = self.labels
        for v in verdicts:
            agent = labels.agent(v.agent)
            judged = v.judged
            k: Key = (agent, "true" if judged else "false")
            t[n.TURNS][k] = t[n.TURNS].get(k, 0) + 1
            if v.calls:
                t[n.TURNS_WITH_CALLS][(agent,)] = t[n.TURNS_WITH_CALLS].get((agent,), 0) + 1
            for c in v.calls:
                tool = tool_label(c.name)
                k = (agent, tool, c.outcome.value)
                calls_t[k] = calls_t.get(k, 0) + 1
                k = (agent, tool)
                if judged:
                    judged_t[k] = judged_t.get(k, 0) + 1
                if c.schema_valid is not None:
                    schema_t[k] = schema_t.get(k, 0) + 1
                    if not c.schema_valid:
                        t[n.SCHEMA_INVALID_CALLS][k] = t[n.SCHEMA_INVALID_CALLS].get(k, 0) + 1
                        viol = t[n.SCHEMA_VIOLATIONS]
                        for kind in sorted({x.kind.value for x in c.violations} or {"other"}):
                            kk = (agent, tool, kind)
                            viol[kk] = viol.get(kk, 0) + 1
                if c.args_ok is not None:
                    args_t[k] = args_t.get(k, 0) + 1
                    if not c.args_ok:
                        t[n.ARGUMENT_MISMATCHES][k] = t[n.ARGUMENT_MISMATCHES].get(k, 0) + 1
            if v.forbidden:  # one per call of a forbidden tool (v.forbidden names each tool once)
                forbidden_t = t[n.FORBIDDEN_CALLS]
                for c in v.calls:
                    if c.name in v.forbidden:
                        k = (agent, tool_label(c.name))
                        forbidden_t[k] = forbidden_t.get(k, 0) + 1
            if judged:
                self._judged_turn(v, agent, checks_t)

    def _check(self, checks_t: Counts, agent: str, check: str, ok: bool) -> None:
        k = (agent, check, "pass" if ok else "fail")
        checks_t[k] = checks_t.get(k, 0) + 1

    def _judged_turn(self, v: TurnVerdict, agent: str, checks_t: Counts) -> None:
        t = self.tables
        tool_label = self._tool
        check = self._check
        for m in v.missed:
            k: Key = (agent, tool_label(m.tool))
            t[n.MISSED_CALLS][k] = t[n.MISSED_CALLS].get(k, 0) + 1
        for tool, count in v.expected_by_tool:  # one entry per tool (the judge sums its slots' minimums)
            k = (agent, tool_label(tool))
            t[n.EXPECTED_CALLS][k] = t[n.EXPECTED_CALLS].get(k, 0) + count
        matrix = self.labels.matrix
        conf = t[n.CONFUSION]
        for exp, act in v.confusion:
            k = (agent, matrix(exp), matrix(act))
            conf[k] = conf.get(k, 0) + 1
        if v.selection_ok is not None:
            check(checks_t, agent, "selection", v.selection_ok)
        check(checks_t, agent, "args", v.args_ok)
        check(checks_t, agent, "schema", v.schema_ok)
        if v.sequence_ok is not None:
            check(checks_t, agent, "sequence", v.sequence_ok)
            if not v.sequence_ok:
                t[n.ORDER_VIOLATIONS][(agent,)] = t[n.ORDER_VIOLATIONS].get((agent,), 0) + 1
        if v.sequence_score is not None:
            self.sequence_score[agent] = self.sequence_score.get(agent, 0.0) + v.sequence_score
        if v.response_ok is not None:
            check(checks_t, agent, "response", v.response_ok)
            t[n.RESPONSE_CHECKED_TURNS][(agent,)] = t[n.RESPONSE_CHECKED_TURNS].get((agent,), 0) + 1
        if v.end_to_end is not None:
            check(checks_t, agent, "end_to_end", v.end_to_end)
            if not v.end_to_end and v.rule:
                k = (agent, self.labels.rule(v.rule))
                t[n.RULE_FAILURES][k] = t[n.RULE_FAILURES].get(k, 0) + 1
        if v.over_calling is not None:
            check(checks_t, agent, "over_calling", not v.over_calling)
