"""Verdict counters kept in plain dicts (updated per distinct verdict signature of a batch), rendered at scrape time."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from monitor.metrics import names as n
from monitor.metrics._batch import MAX_CACHED, SIG_SCORED, Sig, VerdictBatch, cacheable
from monitor.metrics._labels import LabelPolicy
from monitor.verdict import TurnVerdict

Key = tuple[str, ...]
Counts = dict[Key, int]
Plan = tuple[tuple[Counts, Key, int], ...]

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
    """The verdict counters of COMMON.md.

    `add()` counts a batch by signature (see `_batch`): each distinct signature's increments (`plan()`, cached)
    are applied once, multiplied by the number of its verdicts; sequence scores are summed verdict by verdict.
    """

    def __init__(self, labels: LabelPolicy) -> None:
        self.labels = labels
        self.tables: dict[str, Counts] = {name: {} for name in COUNTERS}
        self.sequence_score: dict[str, float] = {}
        self._tool_cache: dict[str, str] = {}
        self._plans: dict[Sig, Plan] = {}

    def set_labels(self, labels: LabelPolicy) -> None:
        self.labels = labels
        self._tool_cache = {}
        self._plans = {}

    def _tool(self, name: str) -> str:
        label = self._tool_cache.get(name)
        if label is None:
            label = self.labels.tool(name)
            if len(self._tool_cache) < 4096 and len(name) <= 256:  # bounded in bytes too: names are free-form
                self._tool_cache[name] = label
        return label

    def add(self, verdicts: Iterable[TurnVerdict]) -> None:
        batch = VerdictBatch.of(verdicts)
        plans = self._plans
        scored = False
        for sig, count in batch.groups().items():
            plan = plans.get(sig)
            if plan is None:
                plan = self.plan(batch.first(sig))
                if cacheable(sig):
                    if len(plans) >= MAX_CACHED:
                        plans.clear()
                    plans[sig] = plan
            for table, key, inc in plan:
                table[key] = table.get(key, 0) + inc * count
            if sig[SIG_SCORED]:
                scored = True
        if scored:  # a float: summed in verdict order, as one verdict at a time would
            seq = self.sequence_score
            agent_label = self.labels.agent
            for v in batch:
                s = v.sequence_score
                if s is not None and v.judged:
                    agent = agent_label(v.agent)
                    seq[agent] = seq.get(agent, 0.0) + s

    def plan(self, v: TurnVerdict) -> Plan:  # noqa: C901 - one flat pass over the verdict
        """What one verdict adds to the tables (all but the sequence score): (table, key, increment)s."""
        acc: dict[tuple[str, Key], int] = {}

        def inc(name: str, key: Key, k: int = 1) -> None:
            acc[name, key] = acc.get((name, key), 0) + k

        tool_label = self._tool
        agent = self.labels.agent(v.agent)
        judged = v.judged
        inc(n.TURNS, (agent, "true" if judged else "false"))
        if v.calls:
            inc(n.TURNS_WITH_CALLS, (agent,))
        for c in v.calls:
            tool = tool_label(c.name)
            inc(n.TOOL_CALLS, (agent, tool, c.outcome.value))
            k = (agent, tool)
            if judged:
                inc(n.JUDGED_CALLS, k)
            if c.schema_valid is not None:
                inc(n.SCHEMA_CHECKED_CALLS, k)
                if not c.schema_valid:
                    inc(n.SCHEMA_INVALID_CALLS, k)
                    for kind in sorted({x.kind.value for x in c.violations} or {"other"}):
                        inc(n.SCHEMA_VIOLATIONS, (agent, tool, kind))
            if c.args_ok is not None:
                inc(n.ARGUMENT_CHECKED_CALLS, k)
                if not c.args_ok:
                    inc(n.ARGUMENT_MISMATCHES, k)
            if c.name in v.forbidden:  # one per call of a forbidden tool (v.forbidden names each tool once)
                inc(n.FORBIDDEN_CALLS, k)
        if judged:
            self._judged_turn(v, agent, inc)
        t = self.tables
        return tuple((t[name], key, k) for (name, key), k in acc.items())

    def _judged_turn(self, v: TurnVerdict, agent: str, inc: Callable[..., None]) -> None:
        tool_label = self._tool
        for m in v.missed:
            inc(n.MISSED_CALLS, (agent, tool_label(m.tool)))
        for tool, count in v.expected_by_tool:  # one entry per tool (the judge sums its slots' minimums)
            inc(n.EXPECTED_CALLS, (agent, tool_label(tool)), count)
        matrix = self.labels.matrix
        for exp, act in v.confusion:
            inc(n.CONFUSION, (agent, matrix(exp), matrix(act)))

        def check(name: str, ok: bool) -> None:
            inc(n.TURN_CHECKS, (agent, name, "pass" if ok else "fail"))

        if v.selection_ok is not None:
            check("selection", v.selection_ok)
        check("args", v.args_ok)
        check("schema", v.schema_ok)
        if v.sequence_ok is not None:
            check("sequence", v.sequence_ok)
            if not v.sequence_ok:
                inc(n.ORDER_VIOLATIONS, (agent,))
        if v.response_ok is not None:
            check("response", v.response_ok)
            inc(n.RESPONSE_CHECKED_TURNS, (agent,))
        if v.end_to_end is not None:
            check("end_to_end", v.end_to_end)
            if not v.end_to_end and v.rule:
                inc(n.RULE_FAILURES, (agent, self.labels.rule(v.rule)))
        if v.over_calling is not None:
            check("over_calling", not v.over_calling)
